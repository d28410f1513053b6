"""Make a tiny fp32 Llama for the real-server tests: config and tokenizer, made here.

Run with the SGLang venv's python (it has ``tokenizers``)::

    python make_tiny_model.py OUT_DIR

writes ``config.json``, ``tokenizer.json``, ``tokenizer_config.json`` and
``generation_config.json`` into ``OUT_DIR``. Nothing comes from a model hub:
the tokenizer is a byte-level BPE trained on a small text built below, so
every string tokenizes; the weights are never written, since SGLang serves
it with ``--load-format dummy`` (random weights). A random model's answers
are random text: what the tests need is a real server, not a good model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CONTEXT_LENGTH = 2048
SPECIALS = ["<s>", "</s>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
# A chat template in the common role-tag style: the OpenAI chat path needs one.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{{ message['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def corpus() -> list[str]:
    """A few thousand words of code and prose: enough merges for a 1k vocabulary."""
    words = (
        "def",
        "return",
        "if",
        "else",
        "elif",
        "for",
        "while",
        "in",
        "import",
        "from",
        "class",
        "self",
        "None",
        "True",
        "False",
        "print",
        "range",
        "len",
        "list",
        "dict",
        "int",
        "str",
        "float",
        "yield",
        "lambda",
        "with",
        "as",
        "try",
        "except",
        "raise",
        "the",
        "a",
        "an",
        "of",
        "to",
        "and",
        "is",
        "are",
        "was",
        "be",
        "this",
        "that",
        "it",
        "on",
        "by",
        "with",
        "for",
        "not",
        "or",
        "but",
        "write",
        "function",
        "python",
        "code",
        "number",
        "string",
        "sum",
        "product",
        "list",
        "sort",
        "reverse",
        "prime",
        "even",
        "odd",
        "value",
        "result",
        "input",
        "output",
        "test",
        "case",
        "answer",
        "problem",
        "question",
        "explain",
        "step",
        "first",
    )
    lines = []
    for i in range(400):
        picked = [words[(i * 7 + j * 13) % len(words)] for j in range(12)]
        lines.append(" ".join(picked) + f" {i} = {i * i};\n    x[{i % 10}] += {i % 3}")
    return lines


def build(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    vocab = tokenizer.get_vocab_size()
    bos, eos = tokenizer.token_to_id("<s>"), tokenizer.token_to_id("</s>")
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "</s>",
                "model_max_length": CONTEXT_LENGTH,
                "chat_template": CHAT_TEMPLATE,
                "add_bos_token": False,
                "clean_up_tokenization_spaces": False,
            },
            indent=1,
        )
    )
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "hidden_act": "silu",
        "max_position_embeddings": CONTEXT_LENGTH,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": vocab,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "attention_bias": False,
        "mlp_bias": False,
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": bos, "eos_token_id": eos})
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_model.py OUT_DIR")
    build(Path(sys.argv[1]))
