//! The shipped rules files' text, one constant per family: `tjoin rules NAME` prints each,
//! and `rules/` holds the same files (a test keeps them in sync).

/// rules/llama.rules.
pub const LLAMA: &str = r#"# Llama and Mistral: Megatron-LM's tensor-parallel ranks (and vLLM's, unfused), merged back:
#   tjoin --rules rules/llama.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# More ranks than key-value heads: add --axis-for '*.k_proj.weight=0 replicas N' (and v_proj),
# N = ranks / num_key_value_heads. The first rule that matches decides (flags before this file).

# Column-parallel: each shard holds some heads or some MLP rows, split along the
# output features (axis 0).
*.q_proj.weight = 0
*.k_proj.weight = 0
*.v_proj.weight = 0
*.gate_proj.weight = 0
*.up_proj.weight = 0

# Row-parallel: split along the input features (axis 1).
*.o_proj.weight = 1
*.down_proj.weight = 1

# Vocabulary-parallel: the embedding and the output head split along the vocabulary
# (axis 0). A model with tied embeddings has no lm_head: its line is `optional`.
*.embed_tokens.weight = 0
lm_head.weight = 0 optional

# Replicated in every shard: the RMS norms (input_layernorm, post_attention_layernorm and
# the final norm). tjoin checks that every shard holds the same bytes and keeps one copy.
*norm.weight = keep
"#;

/// rules/qwen2.rules.
pub const QWEN2: &str = r#"# Qwen2 (and Qwen2.5): Llama's layout with attention biases on q, k and v. Megatron-LM's
# tensor-parallel ranks (and vLLM's, unfused), merged back into one model:
#   tjoin --rules rules/qwen2.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# More ranks than key-value heads (vLLM then gives each head to several ranks): add
#   --axis-for '*.k_proj.*=0 replicas N' --axis-for '*.v_proj.*=0 replicas N'
# with N = ranks / num_key_value_heads. The first rule that matches decides (flags first).

# Column-parallel: weights and biases split along the output features (axis 0); the
# biases are split with their heads (a fresh model's are zeros: the rule says how).
*.q_proj.* = 0
*.k_proj.* = 0
*.v_proj.* = 0
*.gate_proj.weight = 0
*.up_proj.weight = 0

# Row-parallel: split along the input features (axis 1). o_proj has no bias.
*.o_proj.weight = 1
*.down_proj.weight = 1

# Vocabulary-parallel. Models with tied embeddings (Qwen2-0.5B, 1.5B) have no lm_head:
# its line is `optional` (it may match no tensor).
*.embed_tokens.weight = 0
lm_head.weight = 0 optional

# Replicated: the RMS norms.
*norm.weight = keep
"#;

/// rules/mixtral.rules.
pub const MIXTRAL: &str = r#"# Mixtral (sparse mixture of experts): Megatron-LM's tensor-parallel ranks, each expert split
# across the ranks as a Llama MLP is, merged back into one model:
#   tjoin --rules rules/mixtral.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# More ranks than key-value heads (vLLM then gives each head to several ranks): add
#   --axis-for '*.k_proj.weight=0 replicas N' --axis-for '*.v_proj.weight=0 replicas N'
# with N = ranks / num_key_value_heads. The first rule that matches decides (flags first).

# Attention, as in Llama: q, k, v column-parallel (axis 0), o_proj row-parallel (axis 1).
*.q_proj.weight = 0
*.k_proj.weight = 0
*.v_proj.weight = 0
*.o_proj.weight = 1

# Every expert: w1 (gate) and w3 (up) column-parallel, w2 (down) row-parallel.
*.experts.*.w1.weight = 0
*.experts.*.w3.weight = 0
*.experts.*.w2.weight = 1

# The router picks experts from the whole hidden state: every rank holds all of it.
*.block_sparse_moe.gate.weight = keep

# Vocabulary-parallel: the embedding and the output head.
*.embed_tokens.weight = 0
lm_head.weight = 0

# Replicated: the RMS norms.
*norm.weight = keep
"#;

/// rules/phi3.rules.
pub const PHI3: &str = r#"# Phi-3 and Phi-4 (Phi3ForCausalLM: fused qkv_proj and gate_up_proj) split as vLLM splits
# them, each fused part across the ranks, merged back into one model:
#   tjoin --rules rules/phi3.rules --axis-for '*.qkv_proj.weight=0 chunks Q:K:K' \
#         --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# Q, K: config.json's num_attention_heads and num_key_value_heads (Phi-3-mini 32:32:32,
# Phi-3-medium and Phi-4 40:10:10). A wrong guess has the right shape; tjoin refuses it, as
# o_proj's input features tell q's share, and its refusal gives the proportions.

# gate_up_proj is [gate; up], each split across the ranks: rank r holds [gate_r; up_r].
*.gate_up_proj.weight = 0 chunks 2

# Row-parallel: the attention output and the MLP output, along their input features.
*.o_proj.weight = 1
*.down_proj.weight = 1

# Vocabulary-parallel: the embedding and the output head (tied models have no lm_head:
# its line is `optional`).
*.embed_tokens.weight = 0
lm_head.weight = 0 optional

# Replicated: the RMS norms.
*norm.weight = keep
"#;

/// rules/vllm.rules.
pub const VLLM: &str = r#"# vLLM's ranks of a Llama-family model (Llama, Mistral, Qwen2 with its biases), as its
# ShardedStateLoader saves them (model-rank-R-part-P.safetensors: q, k, v fused into
# qkv_proj, gate and up into gate_up_proj), merged back into one fused model:
#   tjoin --rules rules/vllm.rules --axis-for '*.qkv_proj.*=0 chunks Q:K:K' \
#         --like original/ $(ls -v model-rank-*-part-0.safetensors) -o model.safetensors
# Q, K: config.json's num_attention_heads and num_key_value_heads (Llama-3-8B 32:8:8).
# More ranks than key-value heads: each rank holds [q_r; k_(r/N); v_(r/N)], N = ranks / K;
# say so with '*.qkv_proj.*=0 chunks Q:K:K replicas 1:N:N' (4 ranks, 2 heads: replicas 1:2:2).

# gate_up_proj is [gate; up], each split across the ranks: rank r holds [gate_r; up_r].
*.gate_up_proj.weight = 0 chunks 2

# Row-parallel: the attention output and the MLP output, along their input features.
*.o_proj.weight = 1
*.down_proj.weight = 1

# Vocabulary-parallel (vLLM pads the vocabulary to a multiple of 64: the merge keeps
# the padding rows). Tied models have no lm_head: its line is `optional`.
*.embed_tokens.weight = 0
lm_head.weight = 0 optional

# Replicated: the RMS norms.
*norm.weight = keep
"#;

/// rules/gpt2.rules.
pub const GPT2: &str = r#"# GPT-2 in transformers' layout (Conv1D weights are [in, out]: the axes are swapped against a
# Linear's), split by Megatron-LM's GPT-2 tensor parallelism, merged back into one model:
#   tjoin --rules rules/gpt2.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# Fits GPT2LMHeadModel (`transformer.` names; its lm_head is tied to wte) and GPT2Model.
# The first rule that matches decides (flags come before this file).

# The fused attention input c_attn is q | k | v along its output features (axis 1 of the
# weight, axis 0 of the bias), and each rank holds a slice of each: [q_r | k_r | v_r].
# `chunks 3` joins them part by part: every rank's q, then every rank's k, then v.
*.c_attn.weight = 1 chunks 3
*.c_attn.bias = 0 chunks 3

# Column-parallel MLP input: the output features, axis 1 of a Conv1D weight.
*.c_fc.weight = 1
*.c_fc.bias = 0

# Row-parallel: the attention output and the MLP output (both named c_proj) split along
# their input features, axis 0 of a Conv1D weight; their biases are whole in every rank.
*.c_proj.weight = 0
*.c_proj.bias = keep

# Vocabulary-parallel token embedding; the position embedding is replicated.
*wte.weight = 0
*wpe.weight = keep

# Replicated: every LayerNorm (ln_1, ln_2, ln_f).
*ln_* = keep
"#;

/// rules/gpt-neox.rules.
pub const GPT_NEOX: &str = r#"# GPT-NeoX (Pythia, GPT-NeoX-20B) in transformers' layout, split by GPT-NeoX's own (Megatron-LM)
# tensor parallelism, merged back into one model:
#   tjoin --rules rules/gpt-neox.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# The first rule that matches decides (flags come before this file).

# The fused query_key_value is laid out head by head ([q k v] of head 0, then of head 1...),
# so each rank holds whole heads: the plain join is right, and `plain` says so.
*.query_key_value.* = 0 plain

# Column-parallel MLP input (not gated: 4 * hidden, as dense_4h_to_h's input).
*.dense_h_to_4h.* = 0

# Row-parallel: the attention output and MLP output weights split along the input
# features (axis 1); their biases are whole in every rank.
*.attention.dense.weight = 1
*.dense_4h_to_h.weight = 1
*.attention.dense.bias = keep
*.dense_4h_to_h.bias = keep

# Vocabulary-parallel: the input embedding and the (untied) output embedding.
*embed_in.weight = 0
*embed_out.weight = 0

# Replicated: every LayerNorm (input_layernorm, post_attention_layernorm, final_layer_norm).
*layernorm.* = keep
*final_layer_norm.* = keep
"#;

/// rules/bert.rules.
pub const BERT: &str = r#"# BERT encoders (BertModel, RoBERTa, MiniLM such as all-MiniLM-L6-v2; names with or without
# the `bert.` prefix) split by Megatron-LM's BERT tensor parallelism, merged back:
#   tjoin --rules rules/bert.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# Has the pooler; BertForMaskedLM has none and an MLM head instead: use rules/bert-mlm.rules.

# Column-parallel: query, key and value (each shard holds some heads) and the MLP's first
# layer, weights and biases split along the output features (axis 0).
*.attention.self.* = 0
*.intermediate.dense.* = 0

# Row-parallel: the attention output and MLP output weights split along the input features
# (axis 1). Their bias is added once, after the shards' partial sums are added up, so
# every shard holds all of it.
*.output.dense.weight = 1
*.output.dense.bias = keep

# Vocabulary-parallel: the word embeddings split along the vocabulary (axis 0).
*embeddings.word_embeddings.weight = 0

# Replicated in every shard: the position and token-type embeddings (and position_ids,
# where the checkpoint stores it), every LayerNorm, and the pooler.
*embeddings.position_* = keep
*embeddings.token_type_embeddings.weight = keep
*.LayerNorm.* = keep
*pooler.* = keep
"#;

/// rules/bert-mlm.rules.
pub const BERT_MLM: &str = r#"# BERT with its masked-language-model head (BertForMaskedLM: `bert.` names, no pooler, the
# `cls.` head) split by Megatron-LM's BERT tensor parallelism, merged back:
#   tjoin --rules rules/bert-mlm.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# The encoder's rules are rules/bert.rules' (that file has the pooler, which this model lacks).

# Column-parallel: query, key, value and the MLP's first layer (axis 0).
*.attention.self.* = 0
*.intermediate.dense.* = 0

# Row-parallel: the attention output and MLP output weights (axis 1); biases whole.
*.output.dense.weight = 1
*.output.dense.bias = keep

# Vocabulary-parallel: the word embeddings, and the MLM head's output bias, which is split
# with the vocabulary (its decoder weight is the word embeddings, tied, and not stored).
*embeddings.word_embeddings.weight = 0
cls.predictions.bias = 0

# Replicated: position and token-type embeddings, every LayerNorm, and the MLM head's
# transform (a dense layer and a LayerNorm before the decoder).
*embeddings.position_* = keep
*embeddings.token_type_embeddings.weight = keep
*.LayerNorm.* = keep
cls.predictions.transform.* = keep
"#;

/// rules/megatron-gpt.rules.
pub const MEGATRON_GPT: &str = r#"# Megatron-Core GPT models (GPTModel with TransformerEngine layers: Llama-style SwiGLU models
# trained with Megatron-LM or NeMo), their tensor-parallel ranks merged back into one model:
#   tjoin --rules rules/megatron-gpt.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# For a GELU (not gated) MLP use --axis-for '*.linear_fc1.*=0 plain'. With biases
# (add_bias_linear) add --keep '*.linear_proj.bias' --keep '*.linear_fc2.bias'.

# TransformerEngine fuses each norm into the layer after it (linear_qkv.layer_norm_weight,
# linear_fc1.layer_norm_weight, and _bias for LayerNorm): replicated. Listed first, as the
# next rules' globs match them too.
*.layer_norm_* = keep
*final_layernorm.* = keep

# linear_qkv is laid out query group by query group ([q heads of group g; k_g; v_g], ...),
# and each rank holds whole groups: the plain join is right. Megatron-LM needs the ranks to
# divide the groups; ranks sharing a group (more ranks than groups) hold a layout no rule
# states, and only --like sees it (k and v would come out once per rank).
*.linear_qkv.* = 0 plain

# The SwiGLU linear_fc1 is [gate; up], each split across the ranks: rank r holds
# [gate_r; up_r]. `chunks 2` joins every rank's gate, then every rank's up.
*.linear_fc1.* = 0 chunks 2

# Row-parallel: the attention output and the MLP output, along their input features.
*.linear_proj.weight = 1
*.linear_fc2.weight = 1

# Vocabulary-parallel: the word embeddings and the (untied) output layer.
*word_embeddings.weight = 0
output_layer.weight = 0
"#;

/// rules/gemma.rules.
pub const GEMMA: &str = r#"# Gemma and Gemma 2 (GemmaForCausalLM, Gemma2ForCausalLM): Llama's layout, split as Megatron-LM
# (and vLLM, unfused) split a Llama, merged back into one model:
#   tjoin --rules rules/gemma.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# A head is config.json's head_dim wide (256 in Gemma 7B, not hidden_size / heads), which
# tjoin reads to check the merge. More ranks than key-value heads: add
#   --axis-for '*.k_proj.weight=0 replicas N' --axis-for '*.v_proj.weight=0 replicas N'
# with N = ranks / num_key_value_heads. The first rule that matches decides (flags first).

# Column-parallel: each rank holds some heads or some MLP rows (axis 0).
*.q_proj.weight = 0
*.k_proj.weight = 0
*.v_proj.weight = 0
*.gate_proj.weight = 0
*.up_proj.weight = 0

# Row-parallel: along the input features (axis 1).
*.o_proj.weight = 1
*.down_proj.weight = 1

# Vocabulary-parallel. Gemma ties its output head to the embedding: no lm_head is stored,
# and its line is `optional`.
*.embed_tokens.weight = 0
lm_head.weight = 0 optional

# Replicated: the RMS norms (Gemma 2 has four a layer: input, post-attention,
# pre-feedforward and post-feedforward).
*norm.weight = keep
"#;

/// rules/deepseek.rules.
pub const DEEPSEEK: &str = r#"# DeepSeek-V2 and V3 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM: multi-head latent attention,
# routed and shared experts) split as Megatron-Core's MLA with expert tensor parallelism, or
# vLLM, split them, in transformers' names, merged back into one model:
#   tjoin --rules rules/deepseek.rules --like original/ $(ls -v tp*.safetensors) -o model.safetensors
# config.json's qk_nope_head_dim, qk_rope_head_dim and v_head_dim give the heads' widths,
# which tjoin reads to check the merge. The first rule that matches decides (flags first).

# The latent down-projections are whole in every rank (Megatron's linear_q_down_proj and
# linear_kv_down_proj, vLLM's replicated layers). V2-Lite has no q_a_proj: `optional`.
*.self_attn.q_a_proj.weight = keep optional
*.self_attn.kv_a_proj_with_mqa.weight = keep

# The up-projections hold each head's rows together: column-parallel by heads (axis 0).
# V2-Lite's q_proj (no query compression) is split the same way.
*.self_attn.q_b_proj.weight = 0 optional
*.self_attn.kv_b_proj.weight = 0
*.self_attn.q_proj.weight = 0 optional

# Row-parallel: the attention output, along its input features (axis 1).
*.self_attn.o_proj.weight = 1

# Every MLP as a Llama's: the routed experts, the shared experts and the dense layers
# before first_k_dense_replace. gate and up column-parallel, down row-parallel.
*.gate_proj.weight = 0
*.up_proj.weight = 0
*.down_proj.weight = 1

# The router picks experts from the whole hidden state: whole in every rank, with V3's
# correction bias.
*.mlp.gate.weight = keep
*.mlp.gate.e_score_correction_bias = keep optional

# Vocabulary-parallel: the embedding and the output head.
*.embed_tokens.weight = 0
lm_head.weight = 0 optional

# Replicated: the RMS norms (with the latent ones, q_a_layernorm and kv_a_layernorm).
*norm.weight = keep
"#;
