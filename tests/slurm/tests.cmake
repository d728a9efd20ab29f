# SLURM tests: each case brings up its own SLURM (slurm_env.sh): one node, or
# for multinode_* a 2-node cluster of network namespaces; submits
# jobscripts/train.sbatch and checks the outcome (slurm_case.sh says what each
# case checks). Serialised: every case starts daemons and ranks on the same
# few cores. Skipped (exit 77) only when not run as root, or (multinode_*)
# where network namespaces cannot be created.
foreach(case "train;2" "train;4" "impossible" "bad_deck" "rank_killed" "preempt" "sweep" "gpu_select"
        "multinode_span" "multinode_fail" "multinode_unreachable" "multinode_too_many" "multinode_tp_split")
  string(REPLACE ";" "_n" name "${case}")
  add_test(NAME slurm_${name}
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/slurm_case.sh ${case})
  set_tests_properties(slurm_${name} PROPERTIES LABELS slurm
                       ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 360
                       RESOURCE_LOCK pentad_slurm SKIP_RETURN_CODE 77)
endforeach()
# Four trainings of 60 and 20 steps on 2 cores beside the rest of the suite:
# 330 s once under -j2 load (its job waits allow 400 s each).
set_tests_properties(slurm_multinode_span PROPERTIES TIMEOUT 1200)
