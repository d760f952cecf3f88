"""The stale-advice cases of ``recall_quality.py``: a small git project whose
code moves after memory was written about it.

Code moves and advice about a function that no longer exists misleads. The
project has ten modules, each with a function or class that two insights cite
(the file in ``files``, the symbol in the text). The insights are stored while
every module exists; then the code moves, in one commit each:

* **deleted**: four modules are removed, their work rewritten elsewhere under
  other names (a new file git does not see as a rename). Every insight citing
  one of them is fully stale: what it names is gone.
* **renamed file**: two modules are moved (``git mv``, content unchanged): git
  follows them, so their insights are not stale, at most noted as moved.
* **renamed function**: one function is renamed in place: followed too.
* **removed symbol**: one function is removed while its file stays: its
  insights are partly stale (the file is still there).
* the last two modules do not change.

Tasks: two per module, about its topic as a developer would phrase it after
the move (the work still exists; the advice about the old code does not).
A stale injection is a fully stale insight injected into a task; the figure is
their count per task over all the tasks.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Module:
    path: str
    symbol: str
    code: str
    advice: tuple[str, str]
    tasks: tuple[str, str]
    fate: str  # "deleted", "renamed-file", "renamed-function", "removed-symbol", "kept"
    moved_to: str = ""  # the new path or the new symbol name


MODULES = (
    Module(
        "src/payments/refunds.py",
        "issue_refund",
        "def issue_refund(order, amount):\n    return order.refund(amount)\n",
        (
            "issue_refund in src/payments/refunds.py must compare the amount with the "
            "order's captured total first: a larger refund raises RefundTooLarge.",
            "Call issue_refund (src/payments/refunds.py) inside the payment lock, never "
            "from a request thread that already holds the order row.",
        ),
        ("Allow partial refunds of an order", "Refund the shipping fee when an order is refunded"),
        "deleted",
    ),
    Module(
        "src/notify/sms.py",
        "send_sms",
        "def send_sms(number, text):\n    return gateway.post(number, text)\n",
        (
            "send_sms in src/notify/sms.py truncates at 160 characters; split longer "
            "texts with split_segments before calling it.",
            "Phone numbers passed to send_sms (src/notify/sms.py) must be E.164: "
            "normalise them with to_e164 first.",
        ),
        ("Send an SMS when a delivery is late", "Let users opt out of SMS notifications"),
        "deleted",
    ),
    Module(
        "src/reports/export_csv.py",
        "export_orders_csv",
        "def export_orders_csv(orders, out):\n    out.write(header(orders))\n",
        (
            "export_orders_csv in src/reports/export_csv.py writes a UTF-8 BOM so Excel "
            "opens it; keep it when adding columns.",
            "Stream rows in export_orders_csv (src/reports/export_csv.py) with "
            "yield_per(500): loading every order at once runs out of memory.",
        ),
        ("Add the customer email column to the orders export", "Export refunds as CSV too"),
        "deleted",
    ),
    Module(
        "src/auth/legacy_tokens.py",
        "LegacyTokenVerifier",
        "class LegacyTokenVerifier:\n    def verify(self, token):\n        return token\n",
        (
            "LegacyTokenVerifier in src/auth/legacy_tokens.py accepts HS256 only; "
            "reject any other alg header before verify().",
            "Register LegacyTokenVerifier (src/auth/legacy_tokens.py) after the session "
            "middleware, or API keys are checked twice.",
        ),
        ("Accept API tokens in the Authorization header", "Expire API tokens after 90 days"),
        "deleted",
    ),
    Module(
        "src/search/query.py",
        "parse_search_query",
        "def parse_search_query(text):\n    return text.split()\n",
        (
            "parse_search_query in src/search/query.py lowercases terms but keeps quoted "
            "phrases intact; test both when changing it.",
            "Operators such as status:open are parsed by parse_search_query "
            "(src/search/query.py); add new ones to its OPERATORS table.",
        ),
        ("Support a tag: operator in search", "Make search ignore accents"),
        "renamed-file",
        "src/search/parser.py",
    ),
    Module(
        "src/mail/templates.py",
        "render_email",
        "def render_email(name, context):\n    return env.get_template(name).render(context)\n",
        (
            "render_email in src/mail/templates.py autoescapes; mark trusted HTML with "
            "Markup explicitly, never with |safe in the template.",
            "Every template render_email (src/mail/templates.py) loads needs a plain-text "
            "twin next to it, name.txt beside name.html.",
        ),
        (
            "Add a welcome email for new teams",
            "Send the password reset email in the user's language",
        ),
        "renamed-file",
        "src/notify/email_templates.py",
    ),
    Module(
        "src/search/indexer.py",
        "reindex_products",
        "def reindex_products(batch):\n    return [index(p) for p in batch]\n",
        (
            "reindex_products in src/search/indexer.py must run in batches of at most "
            "1000 products or the search cluster rejects the bulk request.",
            "After changing a product field, call reindex_products (src/search/indexer.py) "
            "from the on_commit hook, not in the request.",
        ),
        ("Index product tags for search", "Reindex products when a price changes"),
        "renamed-function",
        "rebuild_product_index",
    ),
    Module(
        "src/inventory/stock.py",
        "reserve_stock",
        "def reserve_stock(item, qty):\n    return item.reserve(qty)\n\n\ndef release_stock(item):\n"
        "    return item.release()\n",
        (
            "reserve_stock in src/inventory/stock.py takes a row lock with SELECT ... FOR "
            "UPDATE; never call it twice in one transaction.",
            "reserve_stock (src/inventory/stock.py) returns False instead of raising when "
            "stock is short: check its result.",
        ),
        ("Reserve stock when an order is placed", "Show low stock warnings in the cart"),
        "removed-symbol",
    ),
    Module(
        "src/billing/tax.py",
        "vat_rate",
        "def vat_rate(country):\n    return RATES[country]\n",
        (
            "vat_rate in src/billing/tax.py reads rates from RATES; a new country needs "
            "its rate and a test in tests/test_tax.py.",
            "Round VAT per line with vat_rate (src/billing/tax.py) and Decimal "
            "quantize(ROUND_HALF_UP), never on the invoice total.",
        ),
        ("Add VAT for Norway", "Fix VAT rounding on invoices with many lines"),
        "kept",
    ),
    Module(
        "src/uploads/storage.py",
        "store_upload",
        "def store_upload(stream, key):\n    return bucket.put(key, stream)\n",
        (
            "store_upload in src/uploads/storage.py streams to the bucket; never read "
            "the whole upload into memory first.",
            "Keys given to store_upload (src/uploads/storage.py) must start with the "
            "tenant id so one tenant's files never mix with another's.",
        ),
        ("Store uploaded invoices in the bucket", "Let users replace an uploaded file"),
        "kept",
    ),
)
# Where the deleted modules' work lives after the rewrite (new files, new names).
REWRITTEN = {
    "src/payments/refunds.py": ("src/billing/credit_notes.py", "create_credit_note"),
    "src/notify/sms.py": ("src/notify/messaging.py", "MessageSender"),
    "src/reports/export_csv.py": ("src/reports/tables.py", "write_table"),
    "src/auth/legacy_tokens.py": ("src/auth/api_keys.py", "ApiKeyAuthenticator"),
}


def git(project: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(project), *args],
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@example.invalid",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@example.invalid",
            "HOME": str(project),
            "PATH": "/usr/bin:/bin:/usr/local/bin",
        },
    )


def create(project: Path) -> None:
    """The project as it was when the advice was written: every module, committed."""
    project.mkdir(parents=True, exist_ok=True)
    git(project, "init", "-q", "-b", "main")
    for module in MODULES:
        path = project / module.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(module.code)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "the code the advice is about")


def move(project: Path) -> None:
    """The code moves on (module docstring), one commit per kind of move."""
    for module in MODULES:
        if module.fate == "deleted":
            new_path, new_symbol = REWRITTEN[module.path]
            git(project, "rm", "-q", module.path)
            target = project / new_path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"class {new_symbol}:\n    '''rewritten'''\n    version = 2\n")
            git(project, "add", new_path)
    git(project, "commit", "-q", "-m", "rewrite: old modules removed")
    for module in MODULES:
        if module.fate == "renamed-file":
            (project / module.moved_to).parent.mkdir(parents=True, exist_ok=True)
            git(project, "mv", module.path, module.moved_to)
    git(project, "commit", "-q", "-m", "move modules")
    for module in MODULES:
        path = project / module.path
        if module.fate == "renamed-function":
            path.write_text(module.code.replace(module.symbol, module.moved_to))
        elif module.fate == "removed-symbol":
            path.write_text("def release_stock(item):\n    return item.release()\n")
    git(project, "commit", "-q", "-a", "-m", "rename and remove functions")


def store(memory) -> dict[str, str]:
    """Store every module's advice citing its file; name -> the module's fate."""
    fate_of: dict[str, str] = {}
    for module in MODULES:
        for text in module.advice:
            result = memory.store(text, source="bench", files=[module.path])
            fate_of.setdefault(result["name"], module.fate)
    return fate_of


def tasks() -> list[tuple[str, str]]:
    """(task objective, the cited module's path) for every task."""
    return [(task, module.path) for module in MODULES for task in module.tasks]
