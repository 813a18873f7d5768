"""The Tensor Unit's engines between Fetch and Commit, one module each (issue 29).

Every engine is a value of its own class behind one small protocol, :class:`Engine` (the
engine's options are its fields: a Cast's output type, a Switch's configuration):

==============  ==========================================================================
member          what it is
==============  ==========================================================================
``name``        the op's name in a problem or a graph (``collect``, ``cast``)
``rules``       the registry's rules it checks (model/rules.py, its profile)
``output``      what it makes of an input stream, taking from the declared output only
                what the op chooses (a TRF store's Lane count): the layout a declared
                output must hold the same as
``check``       the rules an input and a declared output break (``[]``: none)
``run``         its value semantics: the slices' flits, a ``(units, time, packet)`` array,
                in to out (``(units, lane, element)`` for a TRF, ``(units, element)`` for
                a VRF), as the hardware moves them: no mapping is consulted, only the
                output's sizes (its configuration)
``cycles``      cycles per slice, every slice in parallel (the guide's Performance)
``derived``     what the compiler derives and tcplan prints (a TRF store's FlitsPerLane)
==============  ==========================================================================

A stream is a :class:`~model.tiers.Tensor` of tier ``stream`` (Chip, Cluster, Slice, Time,
Packet); its values on the slices are an array ``(units, time, packet)`` with the units
(chip, cluster, slice) in order; a register file's, ``(units, lane, element)`` (TRF) or
``(units, element)`` (VRF).  ``run`` and ``output`` are two independent accounts
of the same engine: the executor lays a tensor out by the input mapping, runs ``run``, and
checks the result against the output mapping (executor/engines.py), so a wrong derivation
or a wrong run fails the check.
"""

from __future__ import annotations

from .base import (ENGINES, SPATIAL, Engine, EnginePlan, flit_elements,  # noqa: F401
                   flit_violation, layout_violations, lower, register, same_units)
from . import (cast, collect, commit_adapter, fetch_adapter, inter_slice,  # noqa: E402,F401 - each registers its engine
               register_files, switch, transpose)
