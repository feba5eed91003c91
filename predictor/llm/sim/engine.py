"""The event loop: one engine step at a time, requests joining, preempted and leaving.

Continuous loop, per step: arrivals join the FIFO queue; decoding sequences whose next token
opens a KV block take one (none free: the newest running request is preempted, its blocks
freed, and it re-queues at the front to recompute prompt + generated tokens); the token budget
``max_tokens`` goes to the decodes, then to running prompts' chunks, then to admitting queued
requests (``max_seqs``, free blocks above the watermark; ``full`` admission reserves prompt +
output); the step's time is ``StepTable(decodes, mean context, prompt tokens)``; a finished
prompt emits the first token, a decode one token. Decode bookkeeping is arithmetic in the step
number (a sequence's KV length is ``a + step``), so a step costs O(events), not O(batch).
Static loop: a batch of queued requests prefills together, then decodes until its longest
output (``max_seqs`` per batch, full reservation). A closed loop's client sends its next
request when one finishes. Seconds.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from roofcast.predictor.errors import PredictionError
from roofcast.predictor.llm.sim.policies import Policy
from roofcast.predictor.llm.sim.steptable import StepTable
from roofcast.predictor.llm.sim.workload import Requests


@dataclass(frozen=True)
class SimTrace:
    """What happened: per request ``arrival_s`` (closed loop: filled in), ``first_s`` (first
    token) and ``finish_s``; per step ``series`` columns ``time_s`` (step end), ``queued``,
    ``running``, ``kv_used`` (fraction of blocks), ``tokens`` (emitted); ``preemptions``."""

    arrival_s: np.ndarray
    first_s: np.ndarray
    finish_s: np.ndarray
    output_tokens: np.ndarray
    input_tokens: np.ndarray
    steps: int
    preemptions: int
    series: dict[str, np.ndarray] = field(repr=False)
    clients: int = 0


#: prompt tokens a ``loaded`` step may take in (KV copied, not computed: no budget).
LOADED_BUDGET = 1 << 40


class _State:
    """Mutable state of one continuous-loop run (module docstring)."""

    def __init__(self, req: Requests, policy: Policy, blocks: int, table: StepTable,
                 prefix: int, loaded: bool = False) -> None:
        n = len(req)
        self.p, self.table, self.bt = policy, table, policy.block_tokens
        self.loaded = loaded
        self.arr = [float(x) for x in req.arrival_s]
        self.nin = [int(x) for x in req.input_tokens]
        self.nout = [int(x) for x in req.output_tokens]
        pin = prefix if policy.prefix_cache else 0
        self.cached = [min(pin, x - 1) for x in self.nin]
        pinned = math.ceil(pin / self.bt) if pin else 0
        self.blocks = blocks - pinned
        self.free = self.blocks
        self.watermark = math.ceil(policy.watermark * self.blocks)
        self.gen, self.done = [0] * n, [0] * n
        self.target = [self.nin[i] - self.cached[i] for i in range(n)]
        self.held, self.a, self.entry, self.epoch = [0] * n, [0] * n, [0] * n, [0] * n
        self.first, self.finish = [math.nan] * n, [math.nan] * n
        self.waiting: deque[int] = deque()
        self.running: dict[int, None] = {}
        self.prefilling: dict[int, None] = {}
        self.hist = [0] * self.bt
        self.count = self.sum_ctx = 0
        self.heap: list[tuple[int, int, int]] = []
        self.now, self.step, self.nxt, self.issued = 0.0, 0, 0, req.clients or n
        self.finished = self.preemptions = 0
        self.clients = req.clients
        self.series: dict[str, list[float]] = {k: [] for k in (
            "time_s", "queued", "running", "kv_used", "tokens")}
        self._check_fits()

    def _check_fits(self) -> None:
        need = max(math.ceil((self.nin[i] - self.cached[i] + self.nout[i]) / self.bt)
                   for i in range(len(self.nin)))
        if need > self.blocks:
            raise PredictionError(
                f"a request of {need * self.bt} tokens does not fit the KV pool of "
                f"{self.blocks * self.bt} tokens; shorten the requests or add devices")

    # ------------------------------------------------------------------ decode set
    def _enter_decode(self, i: int) -> None:
        a = self.nin[i] - self.cached[i] + self.gen[i] - self.step - 1
        self.a[i], self.entry[i] = a, self.step
        self.count += 1
        self.sum_ctx += a + self.cached[i]
        if self.p.admission == "current":
            self.hist[a % self.bt] += 1
        heapq.heappush(self.heap, (self.step + self.nout[i] - self.gen[i], i, self.epoch[i]))

    def _leave_decode(self, i: int, step: int) -> int:
        """Remove decoding ``i`` as of the end of ``step``; the blocks it holds."""
        self.count -= 1
        self.sum_ctx -= self.a[i] + self.cached[i]
        self.epoch[i] += 1
        if self.p.admission != "current":
            return self.held[i]
        self.hist[self.a[i] % self.bt] -= 1
        return math.ceil((self.a[i] + step) / self.bt)

    # ------------------------------------------------------------------ lifecycle
    def _finish(self, i: int, blocks: int) -> None:
        self.finish[i] = self.now
        self.free += blocks
        self.running.pop(i, None)
        self.finished += 1
        if self.issued < len(self.arr):  # closed loop: the client sends its next request
            self.arr[self.issued] = self.now
            self.issued += 1

    def _preempt(self) -> int:
        """Preempt the newest running request (recompute); 1 if it needed a block now."""
        v = next(reversed(self.running))
        del self.running[v]
        needed = 0
        if v in self.prefilling:
            del self.prefilling[v]
            self.free += self.held[v]
        else:
            needed = int((self.a[v] + self.step - 1) % self.bt == 0)
            self.free += self._leave_decode(v, self.step - 1)
            self.gen[v] += self.step - 1 - self.entry[v]
        self.held[v], self.done[v] = 0, 0
        self.target[v] = self.nin[v] - self.cached[v] + self.gen[v]
        self.waiting.appendleft(v)
        self.preemptions += 1
        return needed

    def _decode_blocks(self) -> None:
        if self.p.admission != "current" or not self.count:
            return
        need = self.hist[(1 - self.step) % self.bt]
        while need > self.free:
            need -= self._preempt()
        self.free -= need

    def _chunk(self, i: int, budget: int) -> int:
        """Prompt tokens of ``i`` this step within ``budget`` and the free blocks."""
        rem = self.target[i] - self.done[i]
        if not self.p.chunked_prefill and rem > budget:
            # a prompt longer than the whole budget runs alone in its step
            if budget < self.p.max_tokens:
                return 0
            budget = rem
        chunk = min(rem, budget)
        if self.p.admission == "current":
            chunk = min(chunk, (self.held[i] + self.free) * self.bt - self.done[i])
            grow = max(0, math.ceil((self.done[i] + chunk) / self.bt) - self.held[i])
            self.free -= grow
            self.held[i] += grow
        return max(chunk, 0)

    def _admit(self, budget: int, sched: list[tuple[int, int]]) -> int:
        while self.waiting and len(self.running) < self.p.max_seqs and budget > 0:
            i = self.waiting[0]
            if self.p.admission == "full":
                want = math.ceil((self.target[i] + self.nout[i] - self.gen[i]) / self.bt)
            else:
                first = min(self.target[i], budget)
                want = math.ceil(first / self.bt)
            reserve = self.watermark if self.running else 0
            if self.free - want < reserve:
                break
            if not self.p.chunked_prefill and self.target[i] > budget and self.running:
                break
            self.waiting.popleft()
            self.running[i] = None
            self.prefilling[i] = None
            if self.p.admission == "full":
                self.free -= want
                self.held[i] = want
            chunk = self._chunk(i, budget)
            if chunk:
                sched.append((i, chunk))
                budget -= chunk
        return budget

    def _schedule(self) -> list[tuple[int, int]]:
        """(request, prompt tokens) of this step's prefill work (``loaded``: KV copied in,
        bounded by the free blocks only)."""
        budget = LOADED_BUDGET if self.loaded else self.p.max_tokens - self.count
        sched: list[tuple[int, int]] = []
        for i in self.prefilling:
            if budget <= 0:
                break
            chunk = self._chunk(i, budget)
            if chunk:
                sched.append((i, chunk))
                budget -= chunk
        self._admit(budget, sched)
        return sched

    def _complete(self, sched: list[tuple[int, int]]) -> None:
        while self.heap and self.heap[0][0] <= self.step:
            _, i, ep = heapq.heappop(self.heap)
            if ep == self.epoch[i]:
                self.gen[i] = self.nout[i]
                self._finish(i, self._leave_decode(i, self.step))
        for i, chunk in sched:
            self.done[i] += chunk
            if self.done[i] < self.target[i]:
                continue
            del self.prefilling[i]
            self.gen[i] += 1
            if math.isnan(self.first[i]):
                self.first[i] = self.now
            if self.gen[i] >= self.nout[i]:
                self._finish(i, self.held[i])
            else:
                self._enter_decode(i)

    def run(self) -> SimTrace:
        n = len(self.arr)
        while self.finished < n:
            while self.nxt < n and self.arr[self.nxt] <= self.now:
                self.waiting.append(self.nxt)
                self.nxt += 1
            if not self.running and not self.waiting:
                self.now = self.arr[self.nxt]
                continue
            self.step += 1
            self._decode_blocks()
            sched = self._schedule()
            ptok = 0 if self.loaded else sum(c for _, c in sched)
            if not sched and not self.count:  # prompts blocked on KV: free the newest
                self.step -= 1
                if len(self.running) < 2:
                    raise PredictionError(f"the {self.p.name} scheduler stalled: nothing can "
                                          "run in the KV pool; raise the pool or the limits")
                self._preempt()
                continue
            ctx = self.sum_ctx / self.count + self.step if self.count else 0.0
            decodes = self.count
            self.now += self.table(self.count, ctx, ptok)
            self._complete(sched)
            self._record(decodes + sum(1 for i, _ in sched if i not in self.prefilling))
        return self._trace()

    def _record(self, tokens: int) -> None:
        s = self.series
        s["time_s"].append(self.now)
        s["queued"].append(len(self.waiting))
        s["running"].append(len(self.running))
        s["kv_used"].append(1.0 - self.free / max(self.blocks, 1))
        s["tokens"].append(tokens)

    def _trace(self) -> SimTrace:
        return SimTrace(np.array(self.arr), np.array(self.first), np.array(self.finish),
                        np.array(self.nout), np.array(self.nin), self.step, self.preemptions,
                        {k: np.array(v) for k, v in self.series.items()}, self.clients)


def run_continuous(req: Requests, policy: Policy, blocks: int, table: StepTable,
                   prefix_tokens: int = 0, loaded: bool = False) -> SimTrace:
    """Simulate ``req`` on a continuous-batching engine (module docstring); ``loaded``: a
    disaggregated decode pool, whose prompts' KV arrives computed (no prompt compute and no
    token budget: a request's blocks are filled in one step, which re-emits its first token,
    then it decodes)."""
    return _State(req, policy, blocks, table, prefix_tokens, loaded).run()


def _static_batch(st: _State, batch: list[int]) -> None:
    """Run one static batch to its longest output (prefill together, decode padded)."""
    st.step += 1
    st.now += st.table(0, 0.0, sum(st.target[i] for i in batch))
    for i in batch:
        st.first[i] = st.now
        st.gen[i] = 1
    st._record(len(batch))
    ctx0 = sum(st.nin[i] for i in batch) / len(batch)
    left = [i for i in batch if st.nout[i] > 1]
    for i in batch:
        if st.nout[i] <= 1:
            st._finish(i, st.held[i])
    for k in range(1, max(st.nout[i] for i in batch)):
        if not left:
            break
        st.step += 1
        st.now += st.table(len(batch), ctx0 + k, 0.0)
        st._record(len(left))
        for i in [i for i in left if st.nout[i] == k + 1]:
            st._finish(i, st.held[i])
        left = [i for i in left if st.nout[i] > k + 1]


def run_static(req: Requests, policy: Policy, blocks: int, table: StepTable,
               prefix_tokens: int = 0) -> SimTrace:
    """Simulate ``req`` on a static-batching engine: batches of up to ``max_seqs`` queued
    requests whose full contexts fit the KV pool (module docstring)."""
    st = _State(req, policy, blocks, table, prefix_tokens)
    n = len(st.arr)
    while st.finished < n:
        while st.nxt < n and st.arr[st.nxt] <= st.now:
            st.waiting.append(st.nxt)
            st.nxt += 1
        if not st.waiting:
            st.now = st.arr[st.nxt]
            continue
        batch: list[int] = []
        while st.waiting and len(batch) < policy.max_seqs:
            i = st.waiting[0]
            want = math.ceil((st.target[i] + st.nout[i]) / st.bt)
            if want > st.free:
                break
            st.waiting.popleft()
            st.free -= want
            st.held[i] = want
            st.running[i] = None
            batch.append(i)
        _static_batch(st, batch)
    return st._trace()


#: loop name -> runner.
LOOP_RUNNERS = {"continuous": run_continuous, "static": run_static}
