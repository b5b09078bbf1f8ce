"""Plugin discovery, registration by name, hook wrappers and per-task isolation."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest
from lifecycle_ops import Boom, Passthrough, batch

from flintlock import LifecycleError, PluginError, hookimpl
from flintlock.core.hooks.manager import build_plugin_manager, installed_plugins, plugins_for
from flintlock.core.hooks.registry import build_registry
from flintlock.core.hooks.runner import HookRunner
from flintlock.testing import OneInputHarness

BUILT_INS = {
    "one-input-task",
    "two-input-task",
    "source-task",
    "hashmap-backend",
    "sqlite-backend",
    "basic-operators",
    "process-operators",
    "batch-process-operators",
    "sink-operators",
    "print-sink",
}


def test_builtins_arrive_through_entry_points_like_third_party_plugins() -> None:
    found = {p.name: p.distribution for p in installed_plugins()}
    assert set(found) >= BUILT_INS
    assert {found[name] for name in BUILT_INS} == {"flintlock"}
    registry = build_registry(build_plugin_manager())
    assert {"one-input", "two-input", "source"} <= set(registry.names("task type"))
    operators = {"map", "filter", "flat_map", "process", "keyed_process", "co_process", "sink"}
    assert operators | {"keyed_batch_process"} <= set(registry.names("operator"))
    assert {"hashmap", "sqlite"} <= set(registry.names("state backend"))


def test_a_missing_name_lists_what_is_known() -> None:
    registry = build_registry(build_plugin_manager())
    with pytest.raises(PluginError, match=r"no state backend named 'rocks' .*hashmap"):
        registry.get("state backend", "rocks")


def test_a_name_offered_twice_names_both_plugins() -> None:
    class Impostor:
        @hookimpl
        def flintlock_register_operators(self, register: Callable[[str, Any], None]) -> None:
            register("map", object)

    with pytest.raises(PluginError, match="operator 'map' is offered twice: by plugin"):
        build_registry(build_plugin_manager([Impostor()]))


def test_registration_hooks_are_called_through_pluggy_once_per_plugin() -> None:
    """Hook call monitoring (what FLINTLOCK_TRACE_HOOKS uses) sees each registration call,
    each with the one plugin it asks: the registry no longer calls implementations itself."""

    class Extra:
        @hookimpl
        def flintlock_register_sinks(self, register: Callable[[str, Any], None]) -> None:
            register("extra", object)

    extra = Extra()
    manager = build_plugin_manager([extra], use_entry_points=False)
    seen: list[tuple[str, list[object]]] = []
    manager.add_hookcall_monitoring(
        lambda name, impls, kwargs: seen.append((name, [impl.plugin for impl in impls])),
        lambda *_: None,
    )
    registry = build_registry(manager)
    assert registry.names("sink") == ["extra"]
    assert seen == [("flintlock_register_sinks", [extra])]


def test_only_a_job_without_plugin_objects_shares_the_installed_plugins_manager() -> None:
    class Extra:
        @hookimpl
        def flintlock_register_operators(self, register: Callable[[str, Any], None]) -> None:
            register("extra-op", object)

    shared_manager, shared_registry = plugins_for([])
    assert plugins_for(()) == (shared_manager, shared_registry)  # one pair per process
    assert {name for name, _ in shared_manager.list_name_plugin()} == {
        installed.name for installed in installed_plugins()
    }
    manager, registry = plugins_for([extra := Extra()])
    assert manager is not shared_manager and manager.is_registered(extra)
    assert "extra-op" in registry.names("operator")
    assert "extra-op" not in plugins_for([])[1].names("operator")  # nothing leaked
    assert not shared_manager.is_registered(extra)


def test_a_task_with_an_unknown_state_backend_fails_in_set_initial_state() -> None:
    harness = OneInputHarness(Passthrough("a"), state_backend="rocks")
    with pytest.raises(LifecycleError) as caught:
        harness.open()
    assert caught.value.phase == "set_initial_state"
    assert isinstance(caught.value.__cause__, PluginError)


def test_a_wrapper_sees_the_real_steps_error_and_timing_order() -> None:
    seen: list[tuple[str, str]] = []

    class Tracer:
        @hookimpl(wrapper=True)
        def flintlock_operator_process_batch(self, operator: Any) -> Generator[None, Any, Any]:
            seen.append(("before", operator.name))
            try:
                return (yield)
            except Boom:
                seen.append(("error", operator.name))
                raise

    harness = OneInputHarness(
        Passthrough("a"), Passthrough("b", "process_batch"), plugins=[Tracer()]
    )
    with pytest.raises(LifecycleError):
        harness.process_batch(batch(1))
    assert seen == [("before", "a"), ("before", "b"), ("error", "b"), ("error", "a")]


def test_an_unimplemented_hook_is_skipped() -> None:
    runner = HookRunner(build_plugin_manager())
    assert not runner.implemented("flintlock_operator_process_batch")
    assert runner.around("flintlock_operator_process_batch", lambda: 42) == 42


def test_trace_switch_prints_each_hook_call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLINTLOCK_TRACE_HOOKS", "1")
    OneInputHarness(Passthrough("a")).complete()
    err = capsys.readouterr().err
    assert "[flintlock hook] flintlock_task_invoke_phase" in err
    assert "flintlock_operator_open {'operator': 'a'" in err
