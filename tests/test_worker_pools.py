"""Worker pools: each worker keeps its state across calls and hands it over by `each`."""

import pytest

from saberjax.corpus.worker_pools import WorkerProcesses, WorkerThreads


def _remember(worker: dict, value: int) -> int:
    worker.setdefault("values", []).append(value)
    return value * value


def _values(worker: dict) -> tuple[int, list[int]]:
    return worker["worker"], worker.pop("values", [])


def _fail(worker: dict) -> None:
    raise ValueError("bad input, line 3")


@pytest.mark.parametrize("pool_type", [WorkerThreads, WorkerProcesses])
def test_workers_keep_their_state_and_hand_it_over_in_order(pool_type):
    with pool_type(3) as pool:
        results = [pool.submit(_remember, value) for value in range(40)]
        assert [result.result() for result in results] == [value * value for value in range(40)]
        handed = pool.each(_values)
        assert [worker for worker, _ in handed] == list(range(len(handed)))
        assert sorted(value for _, values in handed for value in values) == list(range(40))
        assert all(values == [] for _, values in pool.each(_values))  # forgotten once handed
        workers = len(handed)
        assert pool.each_of(_remember, [(10 * i,) for i in range(workers)]) == [
            100 * i * i for i in range(workers)]
        assert [values for _, values in pool.each(_values)] == [[10 * i]
                                                                for i in range(workers)]
        with pytest.raises(ValueError, match="arguments for"):
            pool.each_of(_remember, [(1,)] * (workers + 1))
        with pytest.raises(ValueError, match="bad input, line 3"):
            pool.submit(_fail).result()
