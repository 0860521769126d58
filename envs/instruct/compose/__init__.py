"""How Instruct-v0 writes a task: material (``material.py``), the plan (``plan.py``), the
instructions' arguments (``constraints.py``), the compliant response (``draft.py``) and the
task itself (``task.py``)."""
