"""The LongDoc document machinery: writers of realistic long documents and what they share.

One writer per document kind, each inventing its cast from a seed and writing in the kind's
own voice: :mod:`annual_report`, :mod:`contract`, :mod:`corporate_policy`, :mod:`incident_log`,
:mod:`minutes`, :mod:`manual` and :mod:`code_file`. They share :mod:`document` (the
:class:`~llmgym.envs.longdoc.writers.document.Writer` base class, planted facts and
:func:`~llmgym.envs.longdoc.writers.document.assemble`), :mod:`cast` (people, dates, money,
identifiers), :mod:`vocab` (the word lists) and :mod:`tokens` (how long a document is).

Not here: the task families that plant facts and ask about them
(:mod:`llmgym.envs.longdoc.families`) and the ways an episode reads a document
(:mod:`llmgym.envs.longdoc.reading`).
"""
