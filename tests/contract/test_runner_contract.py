"""The Runner port's contract (ports.py, docs/runner-protocol.md), the same tests against each of
its adapters, with real Node and one component (tests/components/contract/runner_contract.mjs):

- local: AsyncNodeRunner over the local pool, its pipes read on the loop the calls come from;
- lambda: the AWS path, ThreadedRunner over LambdaRunner, invoking the runner function as the
  emulated deployment does (LocalRunnerFunction: the sandboxed pool answering as lambda.mjs);
- fakes: tests/fakes.py's FakeAsyncRunner over a FakeRunner playing the component's Python twin,
  for what it claims: a batch's messages, order, db hand-on and errors, and hooks. It has no
  clock, loads no code and does not describe (`describe` returns the literal a test gives it,
  options are always empty), so the tests of those run on the real adapters only.

The BlockingRunner port (the pool itself, LambdaRunner, FakeRunner) has the same runs, answers
and hooks: a few tests check it agrees with the async one.

Each adapter is built once per module; each test uses instances of its own."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Coroutine, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from headwater.adapters.aws.lambda_runner import LambdaRunner
from headwater.adapters.aws.local_runner_function import LocalRunnerFunction
from headwater.adapters.local.async_runner import AsyncNodeRunner
from headwater.adapters.local.bundler import LocalBundler
from headwater.adapters.local.node_runner import NodeRunnerPool
from headwater.adapters.threads import ThreadedRunner
from headwater.domain.events import Emit
from headwater.domain.runs import RunResult
from headwater.ports import BlockingRunner, Bundle, Finished, Instance, Responded, RunMessage, Runner, RunnerError
from headwater.settings import Settings
from tests.fakes import FakeAsyncRunner, FakeRunner
from tests.loop_thread import loop_in_thread

T = TypeVar("T")
COMPONENTS = Path(__file__).parent.parent / "components"
CONTRACT = COMPONENTS / "contract" / "runner_contract.mjs"
BROKEN = COMPONENTS / "bad" / "throws_on_import.mjs"
ACCOUNT = "u_contract"
TIMEOUT_MS = 10_000


@dataclass
class Subject:
    """An adapter under the contract: its runner (the async port) and what it is over (the
    blocking port), the bundles of the contract's components, and the loop its calls are awaited on."""

    name: str
    runner: Runner
    blocking: BlockingRunner
    bundles: dict[Path, Bundle]
    loop: asyncio.AbstractEventLoop

    def bundle(self, component: Path = CONTRACT) -> Bundle:
        return self.bundles[component]

    def drive(self, call: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(call, self.loop).result(120)

    def run(self, instance: Instance, events: list[Any], timeout_ms: int = TIMEOUT_MS,
            component: Path = CONTRACT) -> list[RunMessage]:
        async def messages() -> list[RunMessage]:
            return [m async for m in self.runner.run(self.bundle(component), instance, events, timeout_ms)]

        return self.drive(messages())


def instance(instance_id: str, db: dict[str, Any] | None = None) -> Instance:
    return Instance(instance_id, {"greeting": "hi"}, account=ACCOUNT, db=db or {}, bill_to=ACCOUNT,
                    http={"endpoint": f"http://127.0.0.1/http/{instance_id}", "customResponse": True})


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The server's loop, in a thread of its own: the local pool reads its pipes there."""
    with loop_in_thread() as loop:
        yield loop


def _bundles(bundler: LocalBundler) -> dict[Path, Bundle]:
    return {path: bundler.bundle(path.read_text()) for path in (CONTRACT, BROKEN)}


@pytest.fixture(scope="module")
def local(loop: asyncio.AbstractEventLoop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Subject]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("local"), runner_processes=2)
    pool = NodeRunnerPool(settings)
    pool.attach(loop)
    try:
        yield Subject("local", AsyncNodeRunner(pool), pool, _bundles(LocalBundler(settings)), loop)
    finally:
        pool.close()


@pytest.fixture(scope="module")
def aws_lambda(loop: asyncio.AbstractEventLoop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Subject]:
    """No bundle bucket: a bundle goes by hash, the function answers BUNDLE_MISSING the first
    time, and the client sends it again with the code (as on AWS when a container lacks it)."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("lambda"), runner_processes=2)
    pool, bundler = NodeRunnerPool(settings), LocalBundler(settings)
    function = LocalRunnerFunction(pool, bundler)
    blocking = LambdaRunner(function.invoke, on_close=pool.close)
    try:
        yield Subject("lambda", ThreadedRunner(blocking), blocking, _bundles(bundler), loop)
    finally:
        function.close()


def twin(instance: Instance, event: Any) -> RunResult:
    """runner_contract.mjs's `run`, in Python, for the FakeRunner."""
    n, db = event["n"], instance.db
    writes: dict[str, Any] = {"last": n}
    if event.get("fail"):
        failed = RunResult.failed("RUNTIME_ERROR", f"no {n}")
        failed.emits, failed.db_writes = [Emit({"n": n, "before": "fail"})], writes
        return failed
    writes["count"] = count = db.get("count", 0) + 1
    body = json.dumps({"n": n, "count": count, "greeting": instance.props.get("greeting")}, separators=(",", ":"))
    return RunResult(emits=[Emit({"n": n, "count": count, "seen": db.get("last")},
                                 {"id": f"e{n}", "summary": f"event {n}"})],
                     db_writes=writes, response={"status": 201, "body": body,
                                                 "headers": {"x-n": str(n), "content-type": "application/json"}})


def twin_hook(instance: Instance, hook: str) -> RunResult:
    if hook == "deploy":
        return RunResult(emits=[Emit({"hook": "deploy"}, {"id": "deploy"})],
                         db_writes={"deployed": instance.props.get("greeting")})
    return RunResult(db_writes={"active": hook == "activate"})


@pytest.fixture(scope="module")
def fakes(loop: asyncio.AbstractEventLoop) -> Subject:
    fake = FakeRunner()
    fake.script, fake.hooks = twin, twin_hook
    bundles = {CONTRACT: Bundle("contract", "{}"), BROKEN: Bundle("broken", "{}")}
    return Subject("fakes", FakeAsyncRunner(fake), fake, bundles, loop)


@pytest.fixture(params=["local", "lambda", "fakes"])
def subject(request: pytest.FixtureRequest) -> Subject:
    """Every adapter, the fakes' included."""
    return request.getfixturevalue({"lambda": "aws_lambda"}.get(request.param, request.param))


@pytest.fixture(params=["local", "lambda"])
def real(request: pytest.FixtureRequest) -> Subject:
    """The adapters that run code (what the fakes do not claim)."""
    return request.getfixturevalue({"lambda": "aws_lambda"}.get(request.param, request.param))


def finished(messages: list[RunMessage]) -> list[RunResult]:
    assert isinstance(messages[-1], Finished), messages
    assert not any(isinstance(m, Finished) for m in messages[:-1])
    return messages[-1].results


def responded(messages: list[RunMessage]) -> list[tuple[int, int, dict[str, Any]]]:
    """(index, status, body) of each Responded, in the order they came."""
    return [(m.index, m.response["status"], json.loads(m.response["body"])) for m in messages
            if isinstance(m, Responded)]


# runs


def test_a_run_that_responds_yields_its_response_then_its_outcome(subject: Subject) -> None:
    messages = subject.run(instance(f"dc_respond_{subject.name}"), [{"n": 7}])
    assert [type(m).__name__ for m in messages] == ["Responded", "Finished"]
    assert responded(messages) == [(0, 201, {"n": 7, "count": 1, "greeting": "hi"})]
    response = messages[0].response  # type: ignore[union-attr]
    assert response["headers"]["x-n"] == "7"
    assert response["headers"]["content-type"].startswith("application/json")  # an object body is JSON
    [result] = finished(messages)
    assert result.error is None and result.response == response


def test_a_runs_emits_and_db_writes_come_back_in_its_outcome(subject: Subject) -> None:
    [result] = finished(subject.run(instance(f"dc_writes_{subject.name}", db={"count": 41, "last": 3}), [{"n": 4}]))
    assert [(e.event, e.meta) for e in result.emits] == [
        ({"n": 4, "count": 42, "seen": 3}, {"id": "e4", "summary": "event 4"})]
    assert result.db_writes == {"last": 4, "count": 42}


def test_a_batch_runs_in_order_each_on_the_db_the_runs_before_it_left(subject: Subject) -> None:
    """Each run sees the writes of those before it, a failed run's included; each answer comes
    under its run's index, before the outcome; a run that throws fails only itself."""
    events = [{"n": 0}, {"n": 1}, {"n": 2, "fail": True}, {"n": 3}]
    messages = subject.run(instance(f"dc_batch_{subject.name}", db={"count": 10}), events)
    results = finished(messages)
    assert responded(messages) == [(0, 201, {"n": 0, "count": 11, "greeting": "hi"}),
                                   (1, 201, {"n": 1, "count": 12, "greeting": "hi"}),
                                   (3, 201, {"n": 3, "count": 13, "greeting": "hi"})]
    assert [r.emits[0].event for r in results] == [
        {"n": 0, "count": 11, "seen": None}, {"n": 1, "count": 12, "seen": 0},
        {"n": 2, "before": "fail"}, {"n": 3, "count": 13, "seen": 2}]
    assert [r.error_code for r in results] == [None, None, "RUNTIME_ERROR", None]
    assert [r.db_writes for r in results] == [{"last": 0, "count": 11}, {"last": 1, "count": 12}, {"last": 2},
                                              {"last": 3, "count": 13}]


def test_a_component_that_throws_fails_its_run_not_the_call(subject: Subject) -> None:
    messages = subject.run(instance(f"dc_throws_{subject.name}"), [{"n": 5, "fail": True}])
    assert [type(m).__name__ for m in messages] == ["Finished"]  # no answer: the service gives the default one
    [result] = finished(messages)
    assert result.error is not None and result.error["code"] == "RUNTIME_ERROR"
    assert "no 5" in result.error["message"]
    assert [e.event for e in result.emits] == [{"n": 5, "before": "fail"}]  # what it did before the throw
    assert result.db_writes == {"last": 5}


def test_code_that_does_not_load_fails_each_run_of_a_batch_and_a_hook_call(real: Subject) -> None:
    """A batch's runs each fail LOAD_ERROR (the runner reports it per run, as a `result` partial,
    so the call yields its outcome and raises nothing); a hook's call itself fails."""
    results = finished(real.run(instance(f"dc_broken_{real.name}"), [{"n": 0}, {"n": 1}], component=BROKEN))
    assert [r.error_code for r in results] == ["LOAD_ERROR", "LOAD_ERROR"]
    assert all("Unknown Mailgun region" in (r.error or {}).get("message", "") for r in results)
    with pytest.raises(RunnerError) as failed:
        real.drive(real.runner.hook(real.bundle(BROKEN), instance(f"dc_broken_{real.name}"), "deploy", TIMEOUT_MS))
    assert failed.value.code == "LOAD_ERROR" and "Unknown Mailgun region" in failed.value.message


def test_a_run_past_its_timeout_ends_with_a_timeout_outcome_and_the_next_runs_on_a_fresh_worker(real: Subject) -> None:
    """The hanging run's worker is ended: its outcome says TIMEOUT and keeps what it reported
    before; the next run of the instance runs on a new worker, with the db as the service
    hands it on. (The time limit covers a cold worker's start: 2 s is ample, and the run never ends.)"""
    hung = instance(f"dc_timeout_{real.name}")
    [result] = finished(real.run(hung, [{"n": 1, "hang": True}], timeout_ms=2000))
    assert result.error is not None and result.error["code"] == "TIMEOUT"
    assert [e.event for e in result.emits] == [{"n": 1, "before": "hang"}]
    assert result.duration_ms >= 2000
    [after] = finished(real.run(replace(hung, db={"last": 1}), [{"n": 2}]))
    assert after.error is None and after.emits[0].event == {"n": 2, "count": 1, "seen": 1}


def test_a_runner_that_dies_part_way_fails_only_the_runs_it_had_not_reported(real: Subject) -> None:
    """The runs reported before the process died keep their results and answers; the rest fail
    RUNNER_CRASHED, the call raising nothing (it raises when none was reported); the account's
    next run gets a new process. (The
    crashing run waits 1 s first, in which the runner writes what its worker reported before:
    there is nothing to await that a process killed outright has written it. Its own account, so
    that the process it kills serves no other test.)"""
    crashing = replace(instance(f"dc_crash_{real.name}"), account="u_crash", bill_to="u_crash")
    messages = real.run(crashing, [{"n": 0}, {"n": 1, "crash": 1000}, {"n": 2}])
    results = finished(messages)
    assert responded(messages) == [(0, 201, {"n": 0, "count": 1, "greeting": "hi"})]
    assert [r.error_code for r in results] == [None, "RUNNER_CRASHED", "RUNNER_CRASHED"]
    assert results[0].emits[0].event == {"n": 0, "count": 1, "seen": None}
    [after] = finished(real.run(replace(crashing, db={"count": 1, "last": 0}), [{"n": 3}]))
    assert after.error is None and after.emits[0].event == {"n": 3, "count": 2, "seen": 0}
    with pytest.raises(RunnerError) as failed:  # none reported: the call itself failed
        real.run(crashing, [{"n": 4, "crash": 1}, {"n": 5}])
    assert failed.value.code == "RUNNER_CRASHED"


# hooks


def test_hooks_run_with_the_instances_props_and_db(subject: Subject) -> None:
    deployed = instance(f"dc_hooks_{subject.name}")
    deploy = subject.drive(subject.runner.hook(subject.bundle(), deployed, "deploy", TIMEOUT_MS))
    assert deploy.error is None
    assert [(e.event, e.meta) for e in deploy.emits] == [({"hook": "deploy"}, {"id": "deploy"})]
    assert deploy.db_writes == {"deployed": "hi"}
    for hook, active in (("activate", True), ("deactivate", False)):
        result = subject.drive(subject.runner.hook(subject.bundle(), deployed, hook, TIMEOUT_MS))
        assert (result.error, result.emits, result.db_writes) == (None, [], {"active": active})


# calls without an instance


def test_describe_returns_the_components_definition(real: Subject) -> None:
    timed = real.drive(real.runner.describe(real.bundle(), TIMEOUT_MS, ACCOUNT, ACCOUNT))
    definition = timed.value
    assert (definition.name, definition.key, definition.version, definition.type) == (
        "Runner Contract", "test-runner-contract", "1.2.3", "source")
    assert definition.description == "What every runner adapter must do alike."
    assert definition.hooks == ["deploy", "activate", "deactivate"]
    assert definition.has_additional_props is True
    assert definition.configurable_props == [
        {"name": "http", "type": "$.interface.http", "customResponse": True},
        {"name": "db", "type": "$.service.db"},
        {"name": "greeting", "type": "string", "label": "Greeting", "optional": True, "default": "hello"},
        {"name": "colour", "type": "string", "label": "Colour", "remoteOptions": True, "reloadProps": True},
    ]
    assert timed.duration_ms > 0  # measured by the caller


def test_describe_of_code_that_does_not_load_fails_with_its_reason(real: Subject) -> None:
    with pytest.raises(RunnerError) as failed:
        real.drive(real.runner.describe(real.bundle(BROKEN), TIMEOUT_MS, ACCOUNT, ACCOUNT))
    assert failed.value.code == "LOAD_ERROR" and "Unknown Mailgun region" in failed.value.message


def test_additional_props_are_the_props_with_what_additional_props_returns(real: Subject) -> None:
    timed = real.drive(real.runner.additional_props(real.bundle(), "dc_props", {"colour": "teal"}, TIMEOUT_MS,
                                                    ACCOUNT, ACCOUNT))
    assert [p["name"] for p in timed.value] == ["http", "db", "greeting", "colour", "shade"]
    assert timed.value[-1] == {"name": "shade", "type": "string", "label": "Shade of teal"}


def test_options_are_paged_with_their_context_and_filtered_by_the_query(real: Subject) -> None:
    def options(page: int, context: Any, query: str | None = None) -> dict[str, Any]:
        timed = real.drive(real.runner.options(real.bundle(), "dc_options", "colour", {}, page, context, query,
                                               TIMEOUT_MS, ACCOUNT, ACCOUNT))
        return timed.value

    first = options(0, {})
    assert first == {"options": ["red", "green"], "context": {"after": 2}}
    assert options(1, first["context"]) == {"options": ["blue"], "context": None}
    assert options(0, {}, "ee") == {"options": ["green"], "context": {"after": 1}}


def test_every_run_and_hook_is_timed_by_the_caller(real: Subject) -> None:
    """What a call is billed: each run's time as the service measured it, a batch's each its own."""
    results = finished(real.run(instance(f"dc_timed_{real.name}"), [{"n": 0}, {"n": 1, "fail": True}]))
    assert all(r.duration_ms > 0 for r in results)
    hook = real.drive(real.runner.hook(real.bundle(), instance(f"dc_timed_{real.name}"), "activate", TIMEOUT_MS))
    assert hook.duration_ms > 0


# callers


def test_a_caller_that_stops_reading_after_the_answer_leaves_the_instance_usable(subject: Subject) -> None:
    """A request's coroutine may go once it has its answer (its client left): the runner's call
    is not broken by it, and the instance's next run runs."""
    first = instance(f"dc_leaves_{subject.name}")

    async def answer_only() -> Responded:
        run = cast(AsyncGenerator[RunMessage, None],  # every adapter's run is an async generator
                   subject.runner.run(subject.bundle(), first, [{"n": 0}, {"n": 1}], TIMEOUT_MS))
        async with contextlib.aclosing(run) as messages:
            async for message in messages:
                assert isinstance(message, Responded)
                return message
        raise AssertionError("no answer")

    assert subject.drive(answer_only()).index == 0
    [result] = finished(subject.run(replace(first, db={"count": 5}), [{"n": 2}]))
    assert result.error is None and result.emits[0].event["count"] == 6


def test_runs_of_two_instances_of_one_account_go_on_at_once(real: Subject) -> None:
    """One instance's hanging run does not hold up another's: the quick one's outcome comes while
    the hanging one is still waiting (its limit is 5 s; the quick one needs well under that)."""
    async def both() -> list[str]:
        done: list[str] = []

        async def run(name: str, events: list[Any], timeout_ms: int) -> None:
            async for message in real.runner.run(real.bundle(), instance(f"dc_{name}_{real.name}"), events,
                                                 timeout_ms):
                if isinstance(message, Finished):
                    done.append(name)

        hanging = asyncio.ensure_future(run("hanging", [{"n": 0, "stall": True}], 5000))
        await asyncio.sleep(0)  # sent first
        await run("quick", [{"n": 1}], TIMEOUT_MS)
        await hanging
        return done

    assert real.drive(both()) == ["quick", "hanging"]


# the blocking port


def test_the_blocking_port_hands_each_answer_on_with_its_index_and_returns_the_outcomes(subject: Subject) -> None:
    answers: list[tuple[int, int]] = []
    events = [{"n": 0}, {"n": 1, "fail": True}, {"n": 2}]
    results = subject.blocking.run_many(subject.bundle(), instance(f"dc_blocking_{subject.name}"), events, TIMEOUT_MS,
                                        lambda index, response: answers.append((index, response["status"])))
    assert answers == [(0, 201), (2, 201)]
    assert [r.error_code for r in results] == [None, "RUNTIME_ERROR", None]
    assert [r.emits[0].event for r in results] == [
        {"n": 0, "count": 1, "seen": None}, {"n": 1, "before": "fail"}, {"n": 2, "count": 2, "seen": 1}]
    single: list[dict[str, Any]] = []
    one = subject.blocking.run(subject.bundle(), instance(f"dc_blocking1_{subject.name}"), {"n": 3}, TIMEOUT_MS,
                               single.append)
    assert [r["status"] for r in single] == [201] and one.response == single[0]
    deploy = subject.blocking.hook(subject.bundle(), instance(f"dc_blocking_{subject.name}"), "deploy", TIMEOUT_MS)
    assert deploy.db_writes == {"deployed": "hi"}


def test_the_blocking_port_describes_as_the_async_one_does(real: Subject) -> None:
    blocking = real.blocking.describe(real.bundle(), TIMEOUT_MS, ACCOUNT, ACCOUNT).value
    assert blocking == real.drive(real.runner.describe(real.bundle(), TIMEOUT_MS, ACCOUNT, ACCOUNT)).value
