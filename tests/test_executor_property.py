"""Property test: random small DMA problems lower, execute, verify, and agree with the
per-element brute-force oracle of test_dma_bruteforce (which never runs the executor)."""

import math

from hypothesis import HealthCheck, assume, given, settings, strategies as st

from tcplan.executor.run import run_dma
from tcplan.model.rules import TcplanError
from tcplan.planner.lowering import lower_problem
from tcplan.planner.spec import load_problem_text
from test_dma_bruteforce import check


@st.composite
def problems(draw):
    names = ["A", "B", "C"][: draw(st.integers(2, 3))]
    sizes = {a: draw(st.sampled_from([2, 3, 4, 8])) for a in names}
    src = draw(st.permutations(names))
    dst = draw(st.permutations(names))
    # split one axis of the stream for variety
    split = draw(st.sampled_from(names))
    terms = [a for a in names if a != split]
    if sizes[split] % 2 == 0 and sizes[split] > 2:
        terms += [f"{split} / 2", f"{split} % 2"]
    else:
        terms.append(split)
    terms = draw(st.permutations(terms))
    cut = draw(st.integers(1, len(terms)))
    dtype = draw(st.sampled_from(["i8", "i16", "f32", "bf16"]))
    pad = draw(st.booleans())
    last = dst[-1]
    dst_el = ", ".join(dst[:-1] + [f"{last} # {sizes[last] + 1}" if pad else last])
    text = f"""
kind: dma
dtype: {dtype}
axes: {{{', '.join(f'{a}: {s}' for a, s in sizes.items())}}}
source: {{tier: hbm, element: 'm![{', '.join(src)}]'}}
destination: {{tier: hbm, address: 65536, element: 'm![{dst_el}]'}}
stream: {{time: 'm![{', '.join(terms[:cut]) if terms[:cut] else '1'}]',
          packet: 'm![{', '.join(terms[cut:]) or '1'}]'}}
"""
    assume(math.prod(sizes.values()) <= 256)
    return text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_random_dma_problems_verify(text):
    p = load_problem_text(text)
    try:
        plan = lower_problem(p)
    except TcplanError as e:  # a named rule may refuse; it must not be a crash
        assert e.kind == "hardware", str(e)
        return
    result = run_dma(p, plan, seed=5)
    assert result["checked"] == math.prod(p.axes.values())
    check(p)  # the independent per-element oracle agrees
