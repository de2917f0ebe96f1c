"""The C++ discrete-event simulator core (_tiledsl_sim, built from csrc/ by pip install).

Closed-form microbenchmarks (research/spatial.md 6.4): transfer latency, bottleneck bandwidth,
link sharing, DRAM saturation, double-buffered pipelines; deadlock; determinism; LOOP; static
schedules; argument validation.
"""

from __future__ import annotations

import _tiledsl_sim as sim
import pytest

ACQ, REL, COMP, XFER, LOOP = sim.ACQUIRE, sim.RELEASE, sim.COMPUTE, sim.TRANSFER, sim.LOOP


def by_name(report: dict, key: str = "agents") -> dict[str, dict]:
    return {x["name"]: x for x in report[key]}


# ------------------------------------------------------------------------------------------------
# Transfers and bandwidth


def test_single_transfer_latency_is_overhead_plus_bytes_over_bw_plus_latency():
    s = sim.Simulator()
    link = s.add_link("L", 16.0)
    a = s.add_agent("dma")
    s.set_program(a, [(XFER, 10000, 7.0, 3.0, [link], [])])  # 4 full packets + 1808 bytes
    r = s.run(packet_bytes=2048)
    assert r["cycles"] == 7 + 10000 / 16 + 3
    assert r["agents"][0] == {"name": "dma", "busy": 635.0, "stall": 0.0, "finish": 635.0}
    assert r["links"] == [{"name": "L", "bytes": 10000, "busy": 625.0}]
    assert r["events"] == 1 + 5 + 1  # start, 5 packets, completion
    assert r["macs"] == 0 and r["drams"] == []


def test_transfer_over_two_links_runs_at_the_slower_one():
    s = sim.Simulator()
    fast, slow = s.add_link("fast", 64.0), s.add_link("slow", 16.0)
    a = s.add_agent("dma")
    s.set_program(a, [(XFER, 8192, 0, 0, [fast, slow], [])])
    r = s.run()
    assert r["cycles"] == 8192 / 16
    links = by_name(r, "links")
    assert links["fast"] == {"name": "fast", "bytes": 8192, "busy": 8192 / 64}
    assert links["slow"] == {"name": "slow", "bytes": 8192, "busy": 8192 / 16}


def test_transfer_through_a_dram_channel_and_a_link():
    s = sim.Simulator()
    link = s.add_link("L", 64.0)
    ch = s.add_dram("ch0", 8.0)
    a = s.add_agent("dma")
    s.set_program(a, [(XFER, 4096, 2, 100, [link], [ch])])
    r = s.run()
    assert r["cycles"] == 2 + 4096 / 8 + 100
    assert r["drams"] == [{"name": "ch0", "bytes": 4096, "busy": 512.0}]


def test_transfer_without_resources_takes_overhead_plus_latency():
    s = sim.Simulator()
    a = s.add_agent("dma")
    s.set_program(a, [(XFER, 1 << 20, 5, 11, [], []), (XFER, 0, 1, 2, [], [])])
    assert s.run()["cycles"] == 5 + 11 + 1 + 2


def test_two_agents_sharing_a_link_take_twice_as_long_and_interleave():
    n = 16384
    s = sim.Simulator()
    link = s.add_link("shared", 32.0)
    a, b = s.add_agent("a"), s.add_agent("b")
    for x in (a, b):
        s.set_program(x, [(XFER, n, 0, 0, [link], [])])
    r = s.run(packet_bytes=1024)
    assert r["cycles"] == 2 * n / 32
    # Interleaved packets: both finish near the end, a one packet-time before b.
    agents = by_name(r)
    assert agents["a"]["finish"] == 2 * n / 32 - 1024 / 32
    assert agents["b"]["finish"] == 2 * n / 32
    assert r["links"][0]["busy"] == r["cycles"]


def test_disjoint_links_run_in_parallel():
    n = 16384
    s = sim.Simulator()
    l0, l1 = s.add_link("l0", 32.0), s.add_link("l1", 32.0)
    a, b = s.add_agent("a"), s.add_agent("b")
    s.set_program(a, [(XFER, n, 0, 0, [l0], [])])
    s.set_program(b, [(XFER, n, 0, 0, [l1], [])])
    r = s.run()
    assert r["cycles"] == n / 32
    assert [x["finish"] for x in r["agents"]] == [n / 32, n / 32]


def test_incast_of_four_links_into_one_runs_at_the_shared_link():
    s = sim.Simulator()
    sink = s.add_link("sink", 32.0)
    for i in range(4):
        own = s.add_link(f"src{i}", 32.0)
        a = s.add_agent(f"a{i}")
        s.set_program(a, [(XFER, 8192, 0, 0, [own, sink], [])])
    r = s.run()
    assert r["cycles"] == 4 * 8192 / 32
    assert by_name(r, "links")["sink"]["busy"] == r["cycles"]


def test_dram_stream_saturates_at_the_dram_bandwidth():
    transfers, size, dram_bw = 8, 8192, 16.0
    s = sim.Simulator()
    ch = s.add_dram("ch", dram_bw)
    for i in range(4):
        own = s.add_link(f"l{i}", 64.0)
        a = s.add_agent(f"dma{i}")
        s.set_program(a, [(LOOP, transfers, 1), (XFER, size, 0, 0, [own], [ch])])
    r = s.run()
    total = 4 * transfers * size
    assert r["cycles"] == total / dram_bw
    assert r["drams"][0] == {"name": "ch", "bytes": total, "busy": total / dram_bw}

    # With a latency per transfer, one agent alone cannot saturate the channel, but four still
    # nearly do (each agent's latency hides behind the others' packets).
    def with_latency(agents: int) -> float:
        s = sim.Simulator()
        ch = s.add_dram("ch", dram_bw)
        for i in range(agents):
            own = s.add_link(f"l{i}", 64.0)
            a = s.add_agent(f"dma{i}")
            s.set_program(a, [(LOOP, transfers, 1), (XFER, size, 10, 200, [own], [ch])])
        return s.run()["cycles"]

    assert with_latency(1) == transfers * (10 + size / dram_bw + 200)
    t4 = with_latency(4)
    assert 4 * transfers * size / dram_bw <= t4 <= 1.1 * 4 * transfers * size / dram_bw


# ------------------------------------------------------------------------------------------------
# Pipelines


def pipeline(depth: int, n: int, t_in_bytes: int, t_compute: float, out_bytes: int = 0,
             bw: float = 32.0) -> sim.Simulator:
    """DMA in -> compute (-> DMA out), each hand-off through an empty/full semaphore pair of
    `depth` slots, as an ObjectFifo lowers."""
    s = sim.Simulator()
    lin = s.add_link("in", bw)
    empty = s.add_semaphore("in.empty", depth, depth)
    full = s.add_semaphore("in.full", 0, depth)
    dma_in, core = s.add_agent("dma_in"), s.add_agent("core")
    s.set_program(dma_in, [(LOOP, n, 3), (ACQ, empty, 1), (XFER, t_in_bytes, 0, 0, [lin], []),
                           (REL, full, 1)])
    body = [(ACQ, full, 1), (COMP, t_compute, 100), (REL, empty, 1)]
    if out_bytes:
        lout = s.add_link("out", bw)
        o_empty = s.add_semaphore("out.empty", depth, depth)
        o_full = s.add_semaphore("out.full", 0, depth)
        body = [(ACQ, full, 1), (ACQ, o_empty, 1), (COMP, t_compute, 100), (REL, empty, 1),
                (REL, o_full, 1)]
        dma_out = s.add_agent("dma_out")
        s.set_program(dma_out, [(LOOP, n, 3), (ACQ, o_full, 1),
                                (XFER, out_bytes, 0, 0, [lout], []), (REL, o_empty, 1)])
    s.set_program(core, [(LOOP, n, len(body))] + body)
    return s


@pytest.mark.parametrize("t_in_bytes,t_compute", [(4096, 200.0), (9600, 100.0)])
def test_double_buffering_overlaps_the_stages(t_in_bytes, t_compute):
    n, bw = 10, 32.0
    t_in = t_in_bytes / bw
    double = pipeline(2, n, t_in_bytes, t_compute).run()
    single = pipeline(1, n, t_in_bytes, t_compute).run()
    # depth 2: fill (the first transfer) + n x the slower stage (+ the faster stage's drain)
    if t_compute >= t_in:
        assert double["cycles"] == t_in + n * t_compute
    else:
        assert double["cycles"] == n * t_in + t_compute
    # depth 1: no overlap
    assert single["cycles"] == n * (t_in + t_compute)
    assert double["macs"] == single["macs"] == 100 * n
    core = by_name(double)["core"]
    assert core["busy"] == n * t_compute
    assert core["finish"] == double["cycles"]


def test_three_stage_double_buffered_pipeline():
    n, bw = 10, 32.0
    r = pipeline(2, n, 3200, 150.0, out_bytes=2560, bw=bw).run()
    # in 100, compute 150, out 80: fill + n * max(stage) + drain
    assert r["cycles"] == 100 + n * 150 + 80
    r1 = pipeline(1, n, 3200, 150.0, out_bytes=2560, bw=bw).run()
    assert r1["cycles"] > r["cycles"]


def test_stall_is_time_blocked_in_acquire():
    r = pipeline(1, 4, 3200, 50.0).run(trace=True)
    core = by_name(r)["core"]
    # The core waits 100 cycles for each transfer; the DMA waits 50 for each free slot but the first.
    assert core["stall"] == 4 * 100
    assert by_name(r)["dma_in"]["stall"] == 3 * 50
    stalls = [t for t in r["trace"] if t[1] == "stall"]
    assert sum(t[3] - t[2] for t in stalls) == 4 * 100 + 3 * 50


def test_a_stall_record_names_the_acquire_that_blocked():
    """Several ACQUIREs can run in one cycle; the stall's amount says which one blocked (its
    index among the agent's executed instructions, loops unrolled), which is what the static
    scheduler needs to time each ACQUIRE."""
    s = sim.Simulator()
    free, late = s.add_semaphore("free", 2, 2), s.add_semaphore("late", 0, 1)
    a, b = s.add_agent("a"), s.add_agent("b")
    # executed: ACQ free 0, COMP 1, ACQ free 2, COMP 3 (the loop), REL 4, ACQ late 5 (blocks)
    s.set_program(a, [(LOOP, 2, 2), (ACQ, free, 1), (COMP, 5, 0), (REL, free, 2), (ACQ, late, 1)])
    s.set_program(b, [(COMP, 30, 0), (REL, late, 1)])
    r = s.run(trace=True)
    stalls = [t for t in r["trace"] if t[1] == "stall"]
    assert stalls == [(0, "stall", 10.0, 30.0, 5)]


# ------------------------------------------------------------------------------------------------
# Semaphores and deadlock


def test_semaphore_waiters_are_served_fifo_without_bypass():
    s = sim.Simulator()
    sem = s.add_semaphore("s", 1, 3)
    a, b, c = s.add_agent("a"), s.add_agent("b"), s.add_agent("c")
    s.set_program(a, [(ACQ, sem, 2)])                      # blocks at 0 (count 1)
    s.set_program(b, [(COMP, 10, 0), (ACQ, sem, 1)])       # count 1 would do, but a is first
    s.set_program(c, [(COMP, 20, 0), (REL, sem, 1), (COMP, 10, 0), (REL, sem, 1)])
    r = s.run()
    agents = by_name(r)
    assert agents["a"]["finish"] == 20 and agents["a"]["stall"] == 20
    assert agents["b"]["finish"] == 30 and agents["b"]["stall"] == 20


def test_release_at_the_same_cycle_satisfies_an_acquire_without_stall():
    s = sim.Simulator()
    sem = s.add_semaphore("s", 0, 1)
    a, b = s.add_agent("consumer"), s.add_agent("producer")
    s.set_program(a, [(COMP, 10, 0), (ACQ, sem, 1), (COMP, 5, 0)])
    s.set_program(b, [(COMP, 10, 0), (REL, sem, 1)])
    r = s.run(trace=True)
    assert r["cycles"] == 15
    assert by_name(r)["consumer"]["stall"] == 0
    assert not [t for t in r["trace"] if t[1] == "stall"]


def test_under_provisioned_semaphore_deadlocks_and_names_the_waiters():
    s = sim.Simulator()
    full = s.add_semaphore("fifo.full", 0, 2)
    empty = s.add_semaphore("fifo.empty", 2, 2)
    prod, cons = s.add_agent("producer"), s.add_agent("consumer")
    # The consumer takes two items at a time but the producer makes three in all.
    s.set_program(prod, [(LOOP, 3, 3), (ACQ, empty, 1), (COMP, 1, 0), (REL, full, 1)])
    s.set_program(cons, [(LOOP, 2, 3), (ACQ, full, 2), (COMP, 1, 0), (REL, empty, 2)])
    with pytest.raises(sim.DeadlockError) as info:
        s.run()
    msg = str(info.value)
    assert "consumer" in msg and "fifo.full" in msg and "n=2" in msg and "count=1" in msg
    assert "agent 'producer'" not in msg  # it finished ...
    assert "released by: 'producer' (finished)" in msg  # ... and no one else can release
    assert "1 agent not finished" in msg
    assert isinstance(info.value, RuntimeError)


def test_circular_wait_deadlock_lists_every_agent_with_its_pc():
    s = sim.Simulator()
    s1, s2 = s.add_semaphore("s1", 0, 1), s.add_semaphore("s2", 0, 1)
    a, b = s.add_agent("A"), s.add_agent("B")
    s.set_program(a, [(COMP, 3, 0), (ACQ, s1, 1), (REL, s2, 1)])
    s.set_program(b, [(ACQ, s2, 1), (REL, s1, 1)])
    with pytest.raises(sim.DeadlockError, match=r"(?s)'A' pc=1 waits on semaphore 's1'.*'B' pc=0 "
                                                 r"waits on semaphore 's2'") as info:
        s.run()
    # the wait-for graph: who could release what each agent waits for
    assert "'s1' for n=1 (count=0, since cycle 3); released by: 'B' (waiting)" in str(info.value)
    assert "'s2' for n=1 (count=0, since cycle 0); released by: 'A' (waiting)" in str(info.value)


def test_deadlock_message_is_capped():
    s = sim.Simulator()
    sem = s.add_semaphore("never", 0, 1)
    for i in range(30):
        s.set_program(s.add_agent(f"w{i}"), [(ACQ, sem, 1)])
    with pytest.raises(sim.DeadlockError) as info:
        s.run()
    msg = str(info.value)
    assert "'w19'" in msg and "'w20'" not in msg and "and 10 more" in msg


def test_semaphore_overflow_raises_naming_semaphore_and_agent():
    s = sim.Simulator()
    sem = s.add_semaphore("slots", 1, 1)
    a = s.add_agent("writer")
    s.set_program(a, [(REL, sem, 1)])
    with pytest.raises(RuntimeError, match="slots.*overflow.*writer"):
        s.run()


# ------------------------------------------------------------------------------------------------
# Determinism, LOOP, trace


def contended(sim_: sim.Simulator | None = None) -> sim.Simulator:
    """Four DMA agents and four cores sharing two links and a DRAM channel."""
    s = sim_ or sim.Simulator()
    links = [s.add_link(f"l{i}", 24.0 + 8 * i) for i in range(2)]
    ch = s.add_dram("ch", 40.0)
    for i in range(4):
        e, f = s.add_semaphore(f"e{i}", 2, 2), s.add_semaphore(f"f{i}", 0, 2)
        dma, core = s.add_agent(f"dma{i}"), s.add_agent(f"core{i}")
        s.set_program(dma, [(LOOP, 7, 3), (ACQ, e, 1),
                            (XFER, 3000 + 500 * i, 3.5, 17.25, [links[i % 2]], [ch]),
                            (REL, f, 1)])
        s.set_program(core, [(LOOP, 7, 3), (ACQ, f, 1), (COMP, 90.0 + 13 * i, 64), (REL, e, 1)])
    return s


def test_determinism_same_cycles_and_trace():
    s = contended()
    r1 = s.run(trace=True, packet_bytes=512)
    r2 = s.run(trace=True, packet_bytes=512)  # the same simulator again
    r3 = contended().run(trace=True, packet_bytes=512)  # a fresh one
    assert r1 == r2 == r3
    assert r1["events"] > 100
    assert r1["macs"] == 4 * 7 * 64
    kinds = {t[1] for t in r1["trace"]}
    assert kinds <= {"compute", "transfer", "stall"} and {"compute", "transfer"} <= kinds
    for agent, kind, start, end, amount in r1["trace"]:
        assert 0 <= agent < 8 and 0 <= start <= end <= r1["cycles"] and amount >= 0
    assert "trace" not in s.run()


def test_link_and_dram_accounting():
    r = contended().run(packet_bytes=512)
    total = sum(7 * (3000 + 500 * i) for i in range(4))
    assert r["drams"][0]["bytes"] == total
    assert sum(x["bytes"] for x in r["links"]) == total
    assert r["drams"][0]["busy"] == pytest.approx(total / 40.0)
    for x in r["links"] + r["drams"]:
        assert x["busy"] <= r["cycles"]


def test_nested_loops():
    s = sim.Simulator()
    a = s.add_agent("core")
    s.set_program(a, [
        (LOOP, 3, 4),
        (COMP, 1, 1),
        (LOOP, 4, 2),
        (COMP, 2, 5),
        (LOOP, 0, 0),           # empty loop at the end of the inner body
        (LOOP, 0, 1),           # zero iterations: skipped
        (COMP, 1000, 1000),
        (LOOP, 2, 2),
        (LOOP, 2, 1),           # two loops ending at the same instruction
        (COMP, 10, 0),
    ])
    r = s.run()
    assert r["cycles"] == 3 * (1 + 4 * 2) + 2 * 2 * 10
    assert r["macs"] == 3 * (1 + 4 * 5)


def test_loop_body_must_stay_inside_the_program_and_the_enclosing_body():
    s = sim.Simulator()
    a = s.add_agent("core")
    with pytest.raises(ValueError, match="past the end of the program"):
        s.set_program(a, [(LOOP, 2, 2), (COMP, 1, 0)])
    with pytest.raises(ValueError, match="enclosing LOOP at instruction 0"):
        s.set_program(a, [(LOOP, 2, 2), (COMP, 1, 0), (LOOP, 2, 2), (COMP, 1, 0), (COMP, 1, 0)])
    with pytest.raises(ValueError, match="count must be >= 0"):
        s.set_program(a, [(LOOP, -1, 1), (COMP, 1, 0)])


def test_max_events_exceeded_raises():
    with pytest.raises(RuntimeError, match="max_events"):
        contended().run(max_events=50)


def test_a_trace_longer_than_max_trace_raises_instead_of_filling_memory():
    s = sim.Simulator()
    a = s.add_agent("a")
    s.set_program(a, [(LOOP, 10**8, 1), (COMP, 1.0, 1)])  # 10**8 events: 3 GB of trace
    with pytest.raises(RuntimeError, match="the trace exceeds max_trace=1000 records"):
        s.run(trace=True, max_trace=1000)
    s.set_program(a, [(LOOP, 10, 1), (COMP, 1.0, 1)])
    assert len(s.run(trace=True, max_trace=10)["trace"]) == 10  # exactly at the bound


def test_a_link_listed_twice_among_many_is_named():
    s = sim.Simulator()  # (found by sorting the transfer's resources, not an n^2 scan)
    links = [s.add_link(f"l{i}", 8.0) for i in range(1000)]
    a = s.add_agent("a")
    with pytest.raises(ValueError, match="link id 7 \\('l7'\\) listed twice"):
        s.set_program(a, [(XFER, 10, 0, 0, links + [links[7]], [])])


def test_zero_time_loop_cannot_hang():
    s = sim.Simulator()
    sem = s.add_semaphore("s", 0, 1)
    a = s.add_agent("spinner")
    s.set_program(a, [(LOOP, 10**15, 2), (REL, sem, 1), (ACQ, sem, 1)])
    with pytest.raises(RuntimeError, match="instructions executed"):
        s.run(max_events=1000)


# ------------------------------------------------------------------------------------------------
# Static mode


def unrolled_pipeline(n: int, starts: dict[str, list[float]] | None = None) -> sim.Simulator:
    """The three-stage double-buffered pipeline without LOOPs; with `starts`, each instruction
    gets its start cycle appended (static mode)."""
    s = sim.Simulator()
    lin, lout = s.add_link("in", 32.0), s.add_link("out", 32.0)
    ie, if_ = s.add_semaphore("in.empty", 2, 2), s.add_semaphore("in.full", 0, 2)
    oe, of = s.add_semaphore("out.empty", 2, 2), s.add_semaphore("out.full", 0, 2)
    programs = {
        "dma_in": [(ACQ, ie, 1), (XFER, 3200, 4, 6, [lin], []), (REL, if_, 1)] * n,
        "core": [(ACQ, if_, 1), (ACQ, oe, 1), (COMP, 150, 7), (REL, ie, 1), (REL, of, 1)] * n,
        "dma_out": [(ACQ, of, 1), (XFER, 2560, 4, 6, [lout], []), (REL, oe, 1)] * n,
    }
    for name, prog in programs.items():
        a = s.add_agent(name)
        if starts is not None:
            prog = [ins + (t,) for ins, t in zip(prog, starts[name])]
        s.set_program(a, prog)
    return s


def starts_from_trace(s_programs: dict[str, list[tuple]], report: dict) -> dict[str, list[float]]:
    """Start cycles of every instruction, read off a dataflow trace: a COMPUTE/TRANSFER starts
    where its trace record does, an ACQUIRE where the agent's next timed instruction starts (it was
    granted then), a RELEASE where the previous timed instruction ended."""
    names = [a["name"] for a in report["agents"]]
    out = {}
    for idx, name in enumerate(names):
        timed = [t for t in report["trace"] if t[0] == idx and t[1] != "stall"]
        prog = s_programs[name]
        starts: list[float | None] = []
        k, last_end = 0, 0.0
        for ins in prog:
            if ins[0] in (COMP, XFER):
                starts.append(timed[k][2])
                last_end = timed[k][3]
                k += 1
            elif ins[0] == REL:
                starts.append(last_end)
            else:
                starts.append(None)
        nxt = last_end
        for i in range(len(prog) - 1, -1, -1):
            if starts[i] is None:
                starts[i] = nxt
            elif prog[i][0] in (COMP, XFER):
                nxt = starts[i]
        out[name] = starts
    return out


def test_static_schedule_copied_from_a_dataflow_trace_is_accepted_with_the_same_cycles():
    n = 6
    dataflow = unrolled_pipeline(n).run(trace=True)
    programs = {
        "dma_in": [(ACQ,), (XFER,), (REL,)] * n,
        "core": [(ACQ,), (ACQ,), (COMP,), (REL,), (REL,)] * n,
        "dma_out": [(ACQ,), (XFER,), (REL,)] * n,
    }
    starts = starts_from_trace(programs, dataflow)
    static = unrolled_pipeline(n, starts).run(static=True, trace=True)
    assert static["cycles"] == dataflow["cycles"]
    assert static["macs"] == dataflow["macs"]
    assert static["links"] == dataflow["links"]
    for a, b in zip(static["agents"], dataflow["agents"]):
        assert a == b
    assert sorted(static["trace"]) == sorted(dataflow["trace"])
    # A static program runs in dataflow mode too (start cycles are ignored there).
    assert unrolled_pipeline(n, starts).run()["cycles"] == dataflow["cycles"]


def two_transfers(start_b: float, dram_bw: float = 32.0) -> sim.Simulator:
    s = sim.Simulator()
    link = s.add_link("L", 32.0)
    d0, d1 = s.add_dram("d0", dram_bw), s.add_dram("d1", dram_bw)
    a, b = s.add_agent("A"), s.add_agent("B")
    s.set_program(a, [(XFER, 4096, 0, 0, [link], [d0], 0.0)])
    s.set_program(b, [(XFER, 4096, 0, 0, [link], [d1], start_b)])
    return s


def test_static_rejects_a_double_booked_link():
    with pytest.raises(sim.ScheduleError,
                       match=r"link 'L' double-booked: agent 'B' instruction 0 .*agent 'A' "
                             r"instruction 0"):
        two_transfers(start_b=64.0).run(static=True)
    # Back to back is fine.
    assert two_transfers(start_b=128.0).run(static=True)["cycles"] == 256.0


def test_static_accepts_packets_interleaved_in_the_gaps():
    # The DRAM channels (8 B/cycle) are the bottleneck: each packet holds the link 64 of every
    # 256 cycles, so B's packets fit between A's.
    s = two_transfers(start_b=64.0, dram_bw=8.0)
    r = s.run(static=True, packet_bytes=2048)
    assert r["cycles"] == 64.0 + 4096 / 8
    assert r["links"][0]["busy"] == 2 * 4096 / 32
    assert two_transfers(start_b=65.0, dram_bw=8.0).run(static=True)["cycles"] == 65.0 + 512
    with pytest.raises(sim.ScheduleError, match="double-booked"):
        two_transfers(start_b=63.0, dram_bw=8.0).run(static=True)


def test_static_rejects_an_acquire_before_the_data_is_there():
    s = sim.Simulator()
    full = s.add_semaphore("full", 0, 1)
    link = s.add_link("L", 32.0)
    p, c = s.add_agent("producer"), s.add_agent("consumer")
    s.set_program(p, [(XFER, 3200, 0, 0, [link], [], 0.0), (REL, full, 1, 100.0)])
    s.set_program(c, [(ACQ, full, 1, 99.0), (COMP, 10, 1, 99.0)])
    with pytest.raises(sim.ScheduleError,
                       match=r"data not present: agent 'consumer' instruction 0 \(ACQUIRE\) at "
                             r"cycle 99: semaphore 'full' has count 0, needs 1"):
        s.run(static=True)
    # At the release cycle it is fine (releases precede acquires at equal time).
    s.set_program(c, [(ACQ, full, 1, 100.0), (COMP, 10, 1, 100.0)])
    r = s.run(static=True)
    assert r["cycles"] == 110.0
    assert by_name(r)["consumer"]["stall"] == 100.0


def test_static_counts_a_release_later_in_the_same_cycle():
    """Data released in a cycle is present in that cycle, even when the releasing agent gets
    there through zero-length steps queued after the consumer's ACQUIRE."""
    s = sim.Simulator()
    full, empty = s.add_semaphore("full", 0, 1), s.add_semaphore("empty", 1, 1)
    p, c = s.add_agent("producer"), s.add_agent("consumer")
    s.set_program(c, [(ACQ, full, 1, 50.0), (COMP, 10, 1, 50.0)])
    s.set_program(p, [(COMP, 50, 0, 0.0), (COMP, 0, 0, 50.0), (ACQ, empty, 1, 50.0),
                      (REL, full, 1, 50.0)])
    r = s.run(static=True)
    assert r["cycles"] == 60.0 and by_name(r)["consumer"]["stall"] == 50.0


def test_static_rejects_overlapping_instructions_of_one_agent():
    s = sim.Simulator()
    a = s.add_agent("core")
    s.set_program(a, [(COMP, 10, 0, 0.0), (COMP, 10, 0, 5.0)])
    with pytest.raises(sim.ScheduleError, match="instruction 1 .* before its previous instruction 0"):
        s.run(static=True)


def test_static_mode_needs_start_cycles_and_no_loops():
    s = sim.Simulator()
    a = s.add_agent("core")
    s.set_program(a, [(COMP, 10, 0)])
    with pytest.raises(ValueError, match="no start cycle"):
        s.run(static=True)
    s.set_program(a, [(LOOP, 1, 1, 0.0), (COMP, 10, 0, 0.0)])
    with pytest.raises(ValueError, match="LOOP"):
        s.run(static=True)


# ------------------------------------------------------------------------------------------------
# Validation: bad input raises, never crashes


def test_invalid_arguments_raise_value_error():
    s = sim.Simulator()
    link = s.add_link("L", 8.0)
    sem = s.add_semaphore("s", 0, 2)
    a = s.add_agent("a")
    bad_programs = {
        "agent id 7 out of range": (7, []),
        "semaphore id 3 out of range": (a, [(ACQ, 3, 1)]),
        "link id 5 out of range": (a, [(XFER, 10, 0, 0, [5], [])]),
        "dram id 0 out of range": (a, [(XFER, 10, 0, 0, [link], [0])]),
        "listed twice": (a, [(XFER, 10, 0, 0, [link, link], [])]),
        "unknown opcode 9": (a, [(9, 1, 2)]),
        "takes 2 fields": (a, [(COMP, 1)]),
        "cycles must be a finite number": (a, [(COMP, -1.0, 0)]),
        "overhead must be a finite": (a, [(XFER, 10, float("nan"), 0, [link], [])]),
        "bytes must be >= 0": (a, [(XFER, -10, 0, 0, [link], [])]),
        "n must be >= 1": (a, [(REL, sem, 0)]),
        "could never be satisfied": (a, [(ACQ, sem, 3)]),
        "expected a tuple": (a, [5]),
        "sem must be an int": (a, [(ACQ, 0.5, 1)]),
        "links must be a list": (a, [(XFER, 10, 0, 0, link, [])]),
        "macs must be >= 0": (a, [(COMP, 1, -5)]),
    }
    for message, (agent, program) in bad_programs.items():
        with pytest.raises(ValueError, match=message):
            s.set_program(agent, program)
    with pytest.raises(ValueError, match="bytes_per_cycle"):
        s.add_link("x", 0.0)
    with pytest.raises(ValueError, match="bytes_per_cycle"):
        s.add_dram("x", float("inf"))
    with pytest.raises(ValueError, match="initial <= maximum"):
        s.add_semaphore("x", 3, 2)
    with pytest.raises(ValueError, match="packet_bytes"):
        s.run(packet_bytes=0)
    with pytest.raises(TypeError):
        s.set_program(a, None)
    # A failed set_program leaves the old program in place.
    s.set_program(a, [(COMP, 5, 1)])
    with pytest.raises(ValueError):
        s.set_program(a, [(LOOP, 1, 2), (LOOP, 1, 2), (COMP, 1, 0), (COMP, 1, 0)])
    assert s.run()["cycles"] == 5


def test_accepts_numpy_scalars_and_ints_for_floats():
    np = pytest.importorskip("numpy")
    s = sim.Simulator()
    link = s.add_link("L", np.float32(16))
    a = s.add_agent("a")
    s.set_program(a, [(XFER, np.int64(1600), 0, np.float64(1.5), [np.int32(link)], []),
                      (COMP, np.int64(3), np.int16(2))])
    assert s.run()["cycles"] == 100 + 1.5 + 3


def test_module_exports():
    assert (sim.ACQUIRE, sim.RELEASE, sim.COMPUTE, sim.TRANSFER, sim.LOOP) == (0, 1, 2, 3, 4)
    assert issubclass(sim.DeadlockError, RuntimeError)
    assert issubclass(sim.ScheduleError, RuntimeError)
    s = sim.Simulator()
    assert s.run() == {"cycles": 0.0, "events": 0, "macs": 0, "agents": [], "links": [],
                       "drams": []}


# ------------------------------------------------------------------------------------------------
# Bad input at the edges of the number types: an error, never a wrong number or a hang


def test_mac_and_byte_counts_that_overflow_raise():
    s = sim.Simulator()
    a = s.add_agent("a")
    s.set_program(a, [(LOOP, 4, 1), (COMP, 1.0, 2**62)])
    with pytest.raises(RuntimeError, match="MAC count overflows"):
        s.run()
    s = sim.Simulator()
    link = s.add_link("L", 2.0**62)
    a = s.add_agent("a")
    s.set_program(a, [(LOOP, 4, 1), (XFER, 2**62, 0, 0, [link], [])])
    with pytest.raises(RuntimeError, match="byte count of link 'L' overflows"):
        s.run(packet_bytes=2**62)


@pytest.mark.parametrize("static", [False, True])
def test_simulated_time_that_overflows_raises(static):
    s = sim.Simulator()
    a = s.add_agent("a")
    s.set_program(a, [(COMP, 1.7e308, 1, 0.0), (COMP, 1.7e308, 1, 1.7e308)])
    with pytest.raises(RuntimeError, match="simulated time overflows"):
        s.run(static=static)


def test_a_static_transfer_of_too_many_packets_raises_instead_of_hanging():
    s = sim.Simulator()
    link = s.add_link("L", 1.0)
    a = s.add_agent("a")
    s.set_program(a, [(XFER, 2**34, 0, 0, [link], [], 0.0)])  # 2**62 took forever to refuse
    with pytest.raises(RuntimeError, match="max_events=1000 exceeded at cycle 0: agent 'a' "
                                           "instruction 0 .* as 17179869184 packets of 1"):
        s.run(static=True, packet_bytes=1, max_events=1000)


def test_a_zero_time_loop_polls_for_interrupts():
    """Ctrl-C (a signal handler's exception) stops a long run of zero-time instructions too,
    not only one of events."""
    import signal

    class Interrupted(Exception):
        pass

    def interrupt(signum, frame):
        raise Interrupted

    s = sim.Simulator()
    sem = s.add_semaphore("s", 0, 1)
    a = s.add_agent("spinner")
    s.set_program(a, [(LOOP, 10**15, 2), (REL, sem, 1), (ACQ, sem, 1)])
    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)  # the C++ run holds the GIL: a thread cannot
    try:
        with pytest.raises(Interrupted):
            s.run(max_events=10**9)  # 1.6e10 instructions allowed: about a minute
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
