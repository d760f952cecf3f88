"""The Tasks pages: the task graph drawn with a row per task (``/tasks``), and
one task's attempts, judges, settlements and tampering flags (``/task/ID``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from helix.service import taskgraph
from helix.ui import graph, web

LEGEND = [
    ("ready", "ready"),
    ("blocked", "blocked"),
    ("progress", "in progress"),
    ("closed", "closed"),
    ("failed", "closed, not delivered"),
    ("other", "cancelled or deferred"),
]


def tasks_page(request: Request) -> Response:
    view = taskgraph.overview(web.service(request))
    drawing = (
        graph.draw(view["nodes"], view["edges"], web.url(request, "/task/"))
        if view["nodes"]
        else None
    )
    return web.page(
        request, "tasks.html", active="/tasks", view=view, drawing=drawing, legend=LEGEND
    )


def task_page(request: Request) -> Response:
    view = taskgraph.detail(web.service(request), request.path_params["task_id"])
    return web.page(request, "task.html", active="/tasks", view=view, legend=dict(LEGEND))


routes = [
    Route("/tasks", tasks_page, name="tasks"),
    Route("/task/{task_id}", task_page, name="task"),
]
