"""Texts a user types, in the shapes a client's harness has too: for the task reader's tests
(tests/test_wrappers.py, tests/test_reader_evidence.py)."""

# A user's own spec, as issue 54 found one routed to the weakest tier: a one-line ask, an
# instruction, then headings and lists (the shape a template's page of rules has too).
SPEC = """Implement a lock-free multi-producer multi-consumer queue in C++20.

You must follow these requirements exactly.

## Requirements

- Use only std::atomic with explicit memory orders; no mutexes anywhere.
- Prove linearizability of enqueue and dequeue, and freedom from ABA.
- Provide a TLA+ model of the algorithm and check it with TLC for 3 producers and 3 consumers.

## Benchmarks

1. Compare throughput against a mutex-guarded std::deque at 1, 4, 16 and 64 threads.
2. Report tail latency (p99, p99.9) per operation.
3. Explain every result that differs from the theory.

## Memory reclamation

- Use hazard pointers or epoch-based reclamation; justify the choice against the workload above.
- Show that no node is freed while another thread can still dereference it, under every interleaving
  the C++20 memory model allows (not only sequential consistency).
- Bound the memory held by retired nodes as a function of the number of threads.

## Correctness testing

1. Run the queue under ThreadSanitizer and under a stress test of 10^9 operations with random pauses.
2. Write a linearizability checker (Wing & Gong, or Lowe's optimisation) and run it on recorded histories.
3. Test on x86-64 and on ARM64: weaker hardware ordering must not break any invariant.
4. Add a property-based test that compares the queue's results with a sequential model.

## API

- `bool try_enqueue(T value)`, `std::optional<T> try_dequeue()`, `size_t size_approx() const`.
- The queue is bounded, with its capacity a power of two fixed at construction.
- T may be move-only; no operation may allocate after construction.

## Non-goals

- No blocking fallback: when the queue is full or empty, the call returns at once.
- No fairness guarantee between producers beyond lock-freedom; say where starvation can occur.
- No support for platforms without a double-width compare-and-swap; fail the build there with a clear message.

## Deliverables

- The header, the proofs as a markdown document, the TLA+ spec, the benchmark harness.
- Never skip a proof step; state every invariant you rely on.
- Explain the design in terms an experienced engineer who has not read the literature can follow.
"""
PROBLEM = ("Problem: find the number of lattice paths from (0,0) to (n,n) that never cross the diagonal, and "
           "prove the closed form.\n\nRules:\n- Give the bijection explicitly.\n- Do not use generating functions.\n"
           "- Check the formula for n = 1..6 by hand.\n- State which steps need induction and carry them out.\n"
           "- Finish with the asymptotic growth, with constants.\n" * 3)
