"""What each runtime runs of EyeLike, and how eyefold knows it.

- :mod:`.installed`: the runtimes eyefold can target and their installed versions;
- :mod:`.table`: one runtime's EyeLike support table (:class:`~.table.EyeLikeSupport`);
- :mod:`.probe`: measuring that table on the installed onnxruntime;
- :mod:`.cache`: the measured tables, cached per runtime version;
- :mod:`.measured`: the tables eyefold ships for OpenVINO, tract and TVM (and the Casts
  and lowered forms of every runtime), measured with a stated version on a stated date;
- :mod:`.profile`: a runtime's whole profile (:class:`~.profile.RuntimeProfile`);
- :mod:`.support`: the table and profile to use for a run (cache, probe or shipped);
- :mod:`.forms`: the forms an EyeLike can take, and the cheapest one a runtime runs;
- :mod:`.runners`: running a model on a real runtime (the tests and benchmarks).
"""
