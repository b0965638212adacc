"""What each runtime runs of EyeLike, and how eyefold knows it.

- :mod:`.installed`: the runtimes eyefold can target and their installed versions;
- :mod:`.table`: one runtime's support table (:class:`~.table.EyeLikeSupport`);
- :mod:`.probe`: measuring that table on the installed runtime;
- :mod:`.cache`: the measured tables, cached per runtime version;
- :mod:`.support`: the table to use for a run (cache, probe or built-in fallback).
"""
