# PyTorch parity tests (label `torch`): each tiny deck is trained by pentad
# under every recompute mode and its dump checked by the fp64 oracle
# reference.py (step-1 logits/loss/grads, per-step loss/lr/grad norm, final
# parameters). llama3: the Llama with Llama 3.1's RoPE scaling. Included from
# tests/CMakeLists.txt, which defines PENTAD_TEST_ENV.
foreach(model gpt2 llama llama3)
  foreach(recompute none selective full)
    set(name torch_parity_${model}_${recompute})
    add_test(NAME ${name}
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh
              ${CMAKE_CURRENT_LIST_DIR}/${model}_tiny.toml ${recompute})
    set_tests_properties(${name} PROPERTIES LABELS torch
      ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
  endforeach()
endforeach()

# YaRN's RoPE scaling (yarn_tiny.toml: the pairs along the whole ramp, q and
# k scaled by its attention factor); full recompute applies RoPE again.
foreach(recompute none full)
  add_test(NAME torch_parity_yarn_${recompute}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/yarn_tiny.toml ${recompute})
  set_tests_properties(torch_parity_yarn_${recompute} PROPERTIES LABELS torch
    ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()
# LongRoPE (longrope_tiny.toml: each pair by a factor of its own, the long
# list at the training context; q and k scaled by its attention factor), and
# a partial rotary (model.rotary_dim = 4 of the 8-wide heads, Phi-4-mini's
# kind: RoPE on each head's first 4 channels, over 4, the rest passed).
foreach(recompute none full)
  foreach(kind longrope partial_rotary)
    if(kind STREQUAL "longrope")
      set(args longrope_tiny.toml ${recompute})
    else()
      set(args llama_tiny.toml ${recompute} --set model.rotary_dim=4)
    endif()
    add_test(NAME torch_parity_${kind}_${recompute}
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/${args})
    set_tests_properties(torch_parity_${kind}_${recompute} PROPERTIES LABELS torch
      ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
  endforeach()
endforeach()
# Both: LongRoPE over the 2 turned pairs.
add_test(NAME torch_parity_partial_longrope_none
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/longrope_tiny.toml none
          --set model.rotary_dim=4 --set model.rope_short_factor=[1,1.5] --set model.rope_long_factor=[2.5,9])
set_tests_properties(torch_parity_partial_longrope_none PROPERTIES LABELS torch
  ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
# Linear RoPE scaling (linear_tiny.toml: every pair 4 times slower).
add_test(NAME torch_parity_linear_none
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/linear_tiny.toml none)
set_tests_properties(torch_parity_linear_none PROPERTIES LABELS torch
  ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)

# Qwen2's attention (a llama with model.qkv_bias): the q/k/v biases, added
# before RoPE, and a tied head.
foreach(recompute none full)
  add_test(NAME torch_parity_qwen2_${recompute}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/qwen2_tiny.toml ${recompute})
  set_tests_properties(torch_parity_qwen2_${recompute} PROPERTIES LABELS torch
    ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()

# A head dimension of its own (model.head_dim = 16 in a 32-wide model of 4
# heads: q and the attention output 64 wide), and Qwen3 (the same heads with
# an RMSNorm over each head of q and k before RoPE, model.qk_norm), and Gemma
# (gemma_tiny.toml: GeGLU, RMSNorms scaling by 1 + w, scaled embeddings, one
# key/value head, a tied head).
foreach(model headdim qwen3 gemma)
  foreach(recompute none full)
    add_test(NAME torch_parity_${model}_${recompute}
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/${model}_tiny.toml ${recompute})
    set_tests_properties(torch_parity_${model}_${recompute} PROPERTIES LABELS torch
      ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
  endforeach()
endforeach()

# The other learning-rate schedules (train.lr_schedule), each against the
# oracle's own reading of docs/running.md: per-step lr, loss, grad norm and
# final parameters. wsd: 3 warmup, 3 stable and 4 decaying steps.
foreach(sched linear constant wsd)
  set(extra --set train.lr_schedule=${sched})
  if(sched STREQUAL "wsd")
    list(APPEND extra --set train.decay_steps=4)
  endif()
  add_test(NAME torch_parity_gpt2_lr_${sched}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/gpt2_tiny.toml none ${extra})
  set_tests_properties(torch_parity_gpt2_lr_${sched} PROPERTIES LABELS torch
    ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()

# Mixture of experts (moe_gpt2: every block; moe_llama: block 1): routing,
# capacity dropping, experts, aux and z losses against the fp64 rebuild.
foreach(model moe_gpt2 moe_llama)
  foreach(recompute none full)
    set(name torch_parity_${model}_${recompute})
    add_test(NAME ${name}
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh
              ${CMAKE_CURRENT_LIST_DIR}/${model}_tiny.toml ${recompute})
    set_tests_properties(${name} PROPERTIES LABELS torch
      ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
  endforeach()
endforeach()
# GeGLU experts (model.mlp_act = "gelu_tanh", with Gemma's other two keys):
# the MoE Llama's experts and dense block through the tanh GELU.
add_test(NAME torch_parity_moe_geglu_none
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/moe_llama_tiny.toml none
          --set model.mlp_act=gelu_tanh --set model.norm_plus_one=true --set model.embed_scale=true)
set_tests_properties(torch_parity_moe_geglu_none PROPERTIES LABELS torch
  ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
# Qwen3-MoE: the MoE Llama with Qwen3's q/k norms over heads of their own
# width (16 in the 32-wide model: q 64 wide).
foreach(recompute none full)
  add_test(NAME torch_parity_qwen3moe_${recompute}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/moe_llama_tiny.toml ${recompute}
            --set model.qk_norm=true --set model.head_dim=16)
  set_tests_properties(torch_parity_qwen3moe_${recompute} PROPERTIES LABELS torch
    ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()
# The routing rule (model.renormalize_top_k): top-2 weighed by the raw
# probabilities (Qwen2-MoE's and OLMoE's rule); top-1 by its probability
# (Switch, the default) and renormalised to 1 (the router then learns from
# the auxiliary losses alone).
foreach(variant "raw_top2;--set;model.renormalize_top_k=false" "top1;--set;model.top_k=1"
                "top1_renormalized;--set;model.top_k=1;--set;model.renormalize_top_k=true")
  list(GET variant 0 name)
  list(REMOVE_AT variant 0)
  add_test(NAME torch_parity_moe_llama_${name}_none
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/moe_llama_tiny.toml none ${variant})
  set_tests_properties(torch_parity_moe_llama_${name}_none PROPERTIES LABELS torch
    ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()

# A shared expert (model.shared_expert_ffn) every token goes through beside
# its routed experts: Qwen2-MoE's gated one (sigmoid(x . w) per token) on the
# MoE Llama and GPT-2 (full recompute: the layer runs again in backward), and
# GPT-2's ungated one (DeepSeekMoE's form).
foreach(variant "llama_gated;moe_llama;none;--set;model.shared_expert_ffn=48;--set;model.shared_expert_gate=true"
                "gpt2_gated;moe_gpt2;full;--set;model.shared_expert_ffn=48;--set;model.shared_expert_gate=true"
                "gpt2;moe_gpt2;none;--set;model.shared_expert_ffn=64")
  list(GET variant 0 name)
  list(GET variant 1 model)
  list(GET variant 2 recompute)
  list(REMOVE_AT variant 0 1 2)
  add_test(NAME torch_parity_moe_shared_${name}_${recompute}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/${model}_tiny.toml ${recompute} ${variant})
  set_tests_properties(torch_parity_moe_shared_${name}_${recompute} PROPERTIES LABELS torch
    ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()

# Greedy sampling (issue 18): `pentad sample --temperature 0` of a tiny
# model trained on the docs gives generate.py's fp64 greedy tokens, 32 of them.
# llama3: the Llama with Llama 3.1's RoPE scaling, an original context of 64
# putting its 16-wide heads' pairs in all three bands.
# yarn: YaRN over an original context of 256, its 16-wide heads' pairs along
# the ramp (0 to 4, truncated) and beyond it.
# longrope: LongRoPE over an original context of 16, so that every decode
# starts on the short factors and goes on past 16 positions on the long ones
# (trained at 64: the long); exported as Phi3ForCausalLM. gemma: Gemma's
# three keys, exported as GemmaForCausalLM.
foreach(model gpt2 llama llama3 yarn qwen2 headdim qwen3 longrope gemma)
  set(deck ${model})
  set(extra)
  if(model STREQUAL "llama3")
    set(deck llama)
    set(extra --set model.rope_scaling=llama3 --set model.rope_original_context=64)
  elseif(model STREQUAL "yarn")
    set(deck llama)
    set(extra --set model.rope_scaling=yarn --set model.rope_scaling_factor=4 --set model.rope_original_context=256)
  elseif(model STREQUAL "longrope")
    set(deck llama)
    set(extra --set model.rope_scaling=longrope --set model.rope_scaling_factor=8
              --set model.rope_original_context=16
              --set model.rope_short_factor=[1.0,1.1,1.2,1.3,1.5,1.7,2.0,2.5]
              --set model.rope_long_factor=[1.0,1.5,2.5,4.0,7.0,12.0,20.0,32.0])
  elseif(model STREQUAL "qwen2")  # the Llama with Qwen2's q/k/v biases
    set(deck llama)
    set(extra --set model.qkv_bias=true)
  elseif(model STREQUAL "headdim")  # heads of 32 in a 64-wide model of 4 heads (default 16)
    set(deck llama)
    set(extra --set model.head_dim=32)
  elseif(model STREQUAL "qwen3")  # those heads normalized before RoPE, a tied head
    set(deck llama)
    set(extra --set model.head_dim=32 --set model.qk_norm=true --set model.tied_embeddings=true)
  elseif(model STREQUAL "gemma")  # GeGLU, norms scaling by 1 + w, scaled embeddings, a tied head
    set(deck llama)
    set(extra --set model.mlp_act=gelu_tanh --set model.norm_plus_one=true --set model.embed_scale=true
              --set model.tied_embeddings=true)
  endif()
  add_test(NAME torch_greedy_${model}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_greedy.sh ${CMAKE_CURRENT_LIST_DIR}/${deck}_sample.toml ${extra})
  set_tests_properties(torch_greedy_${model} PROPERTIES LABELS torch
    ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 180)
endforeach()

# Hugging Face export and checkpoint.init_from (hf_export.sh): bitwise round
# trips pentad -> hf -> pentad into each layout listed, then a fine-tuning
# step under the last one whose logits and loss the independent Hugging
# Face-structured model (hf_loader.py) must reproduce.
set(PENTAD_HF_LAYOUTS_gpt2 "1" "2:parallel.cp=2,parallel.zero=1" "4:parallel.tp=2,parallel.pp=2")
set(PENTAD_HF_LAYOUTS_llama "1" "2:parallel.dp=2,parallel.zero=3" "4:parallel.tp=2,parallel.pp=2,parallel.sp=true")
set(PENTAD_HF_LAYOUTS_hf_mixtral "1" "2:parallel.dp=2,parallel.ep=2" "4:parallel.tp=2,parallel.pp=2")
set(PENTAD_HF_LAYOUTS_llama3 "1" "2:parallel.cp=2" "4:parallel.tp=2,parallel.pp=2")
set(PENTAD_HF_LAYOUTS_yarn "1" "4:parallel.cp=2,parallel.tp=2")
set(PENTAD_HF_LAYOUTS_linear "1" "2:parallel.cp=2")
set(PENTAD_HF_LAYOUTS_qwen2 "1" "2:parallel.cp=2" "4:parallel.tp=2,parallel.pp=2,parallel.sp=true")
set(PENTAD_HF_LAYOUTS_headdim "1" "2:parallel.cp=2" "4:parallel.tp=2,parallel.pp=2,parallel.sp=true")
set(PENTAD_HF_LAYOUTS_qwen3 "1" "2:parallel.tp=2" "4:parallel.cp=2,parallel.pp=2")
set(PENTAD_HF_LAYOUTS_hf_qwen3moe "1" "2:parallel.dp=2,parallel.ep=2"
    "4:parallel.tp=2,parallel.pp=2,parallel.expert_tp=true")
set(PENTAD_HF_LAYOUTS_hf_qwen2moe "1" "4:parallel.tp=2,parallel.pp=2,parallel.expert_tp=true,parallel.sp=true")
set(PENTAD_HF_LAYOUTS_gemma "1" "2:parallel.dp=2,parallel.zero=3" "4:parallel.cp=2,parallel.pp=2"
    "4:parallel.tp=4,parallel.sp=true")  # the one key/value head on 4 tp ranks
foreach(model gpt2 llama hf_mixtral llama3 yarn linear qwen2 headdim qwen3 hf_qwen3moe hf_qwen2moe gemma)
  string(REPLACE "hf_" "" short ${model})
  add_test(NAME torch_hf_${short}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/hf_export.sh ${CMAKE_CURRENT_LIST_DIR}/${model}_tiny.toml
            ${PENTAD_HF_LAYOUTS_${model}})
  set(env ${PENTAD_TEST_ENV})
  if(model STREQUAL "headdim")  # Phi-3's LongRoPE and partial rotary, on heads of their own width (16)
    list(APPEND env HF_PHI3_ROPE=1)
  endif()
  set_tests_properties(torch_hf_${short} PROPERTIES LABELS torch
    ENVIRONMENT "${env}" TIMEOUT 240)
endforeach()
# Qwen3-MoE weighing its top 2 by their router probabilities
# (model.renormalize_top_k = false: norm_topk_prob false, Qwen2-MoE's and
# OLMoE's rule): the same round trips, the loader's routing and sampling.
add_test(NAME torch_hf_qwen3moe_raw
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/hf_export.sh ${CMAKE_CURRENT_LIST_DIR}/hf_qwen3moe_tiny.toml
          "1" "2:parallel.dp=2,parallel.ep=2")
set_tests_properties(torch_hf_qwen3moe_raw PROPERTIES LABELS torch
  ENVIRONMENT "${PENTAD_TEST_ENV};HF_DECK_SETS=model.renormalize_top_k=false" TIMEOUT 240)
# The bf16 export through the same loader (one layout: tp2 x pp2).
add_test(NAME torch_hf_llama_bf16
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/hf_export.sh ${CMAKE_CURRENT_LIST_DIR}/llama_tiny.toml
          "4:parallel.tp=2,parallel.pp=2")
set_tests_properties(torch_hf_llama_bf16 PROPERTIES LABELS torch
  ENVIRONMENT "${PENTAD_TEST_ENV};HF_DTYPE=bf16" TIMEOUT 240)

# Multiple-choice evaluation (data.choice_eval, llm.c's HellaSwag format):
# every ending's loss sum and both accuracies against the fp64 rebuild of
# the final weights, the file read by an independent Python reader.
foreach(model gpt2 llama)
  add_test(NAME torch_choice_eval_${model}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_choice.sh ${CMAKE_CURRENT_LIST_DIR}/${model}_tiny.toml)
  set_tests_properties(torch_choice_eval_${model} PROPERTIES LABELS torch
    ENVIRONMENT "${PENTAD_TEST_ENV}" TIMEOUT 120)
endforeach()

# A loss mask (prompt/completion pairs, `pentad prep --prompt-key
# --completion-key`: tests/data/sft.jsonl): the loss is the mean over the
# trained targets only (the oracle's ignore_index), while the MoE's
# load-balancing and z losses still weigh every token routed.
foreach(model gpt2 llama moe_llama)
  add_test(NAME torch_parity_${model}_loss_mask
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_parity.sh ${CMAKE_CURRENT_LIST_DIR}/${model}_tiny.toml none)
  set_tests_properties(torch_parity_${model}_loss_mask PROPERTIES LABELS torch
    ENVIRONMENT "${PENTAD_TEST_ENV};PENTAD_LOSS_MASK=1" TIMEOUT 120)
endforeach()
