"""The coding judge: runs a program against a task's tests in the sandbox and says how it did.

One module per job:

- ``program.py``: the judge's program, the one file shipped into the sandbox (stdlib only): the
  worker where the candidate's code runs, the loop over call tests, stdin/stdout tests, the
  value codec and the static facts of a program;
- ``shipping.py``: what a grading run is given (the program, the tests' inputs) and the
  sandboxes set up for it;
- ``job.py``: the entry points (:func:`~llmgym.envs.coding.judge.job.run_tests`,
  ``run_tests_many``) and the runs of the judge inside the sandbox;
- ``direct.py``: direct mode, no judge process in the sandbox run: the same loop over call
  tests run in this process with the worker alone in each run, and stdin/stdout programs run
  by the judge's runner, one fresh process per test;
- ``verdicts.py``: the judge's records turned into a verdict, and a verdict into feedback;
- ``verifier.py``: the judge as the ``unit_tests`` verifier.

Rewards made of a verdict are :mod:`llmgym.rewards.coding`; the tasks are
:mod:`llmgym.envs.coding.families`. This package imports nothing when imported itself, so that
``program`` (imported by the task builders for the value codec) stays cheap and circle-free.
"""
