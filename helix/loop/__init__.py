"""One attempt at a task: inject, prompt, verify, attribute, learn, report."""
