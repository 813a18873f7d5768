"""The fast subset: `python -m pytest -q -m "not slow"` leaves out the brute-force
enumerations, the fuzz campaign and the whole-library batches below (each the reference
check of something a fast test also touches); the full suite runs them all."""

from __future__ import annotations

import os
import tempfile

import pytest

#: the tests' own op-plan cache (planner/op_cache.py), never the user's: each run starts
#: cold, and every process a test starts shares it
os.environ.setdefault("TCPLAN_CACHE", tempfile.mkdtemp(prefix="tcplan-test-cache-"))

#: modules whose every test is a brute-force enumeration or a fuzz campaign
SLOW_MODULES = {"test_layout_optimality", "test_kernel_layouts", "test_dma_bruteforce",
                "test_fuzz"}
#: single tests (name prefixes) of seconds each
SLOW_TESTS = (
    "test_with_a_free_split_the_outer_model_agrees_with_every_order_as_an_option",
    "test_the_outer_bound_never_exceeds_a_plan_of_its_order",
    "test_the_bound_was_compared_on_many_orders",  # (it reads what the one above gathered)
    "test_free_source_with_a_free_engine_split_against_brute_force",
    "test_planning_library_is_close_to_its_bounds",
    "test_a_conflict_over_many_options_is_minimal_and_the_time_limit_holds",
    "test_batch_meets_every_expectation",
    "test_progress_is_a_bar_on_a_terminal_lines_in_a_log_and_nothing_when_quiet",
    "test_packet_cutting_a_merged_run_counts_an_entry",
    "test_a_row_major_stream_never_costs_more_than_one_that_interleaves_rows",
    "test_vectorized_sixteen_million_positions",
    "test_views_and_index_arrays_agree_byte_for_byte",
    "test_rows_stream_to_a_results_file_and_resume_runs_only_what_is_missing",
    "test_the_cli_solves_lowers_and_batches_graphs",
    "test_example_4_against_the_recount",
    "test_the_report_is_deterministic_and_escapes_the_problem",
    "test_batch_reports_each_stages_time",
    "test_solve_report_and_plot",
    "test_verify_plot_writes_an_svg_and_keeps_the_output",
    "test_the_api_draws",
    "test_a_time_limit_is_never_taken_for_a_rule",
    "test_docs_example_runs",
    "test_run_takes_a_chain_ops_vrf_operands",
    "test_the_index_path_reports_too",
    # every order and packet of a Fetch or Commit (an independent oracle of the widest
    # packet is in the fast set: test_free_fetch_reads_as_wide_as_the_tensor_allows)
    "test_free_stream_is_the_best_of_every_order",
    "test_graph_conflict_across_dma_and_fetch",
    "test_graph_chooses_the_dm_layout_for_the_dma_and_the_fetch_jointly",
)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES or \
                item.name.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
