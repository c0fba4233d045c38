"""An independent NumPy forward pass of all-MiniLM-L6-v2, the reference the Rust MiniLM
embedder is checked against.

Tokenizes with `tokenizers` (each text alone: no padding), reads the weights with
`safetensors.numpy`, and runs BERT in float64 with NumPy only: embeddings and their layer
norm, the encoder layers (self-attention, GELU with erf, feed-forward, post layer norms), then
mean pooling and L2 normalisation, as sentence-transformers does.

As a script: `python minilm_ref.py MODEL_DIR` reads a JSON list of texts on stdin and writes a
JSON list of vectors (one per text, in order) on stdout.
"""

import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

# Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7), as NumPy has no erf.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf(x):
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + _ERF_P * x)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t
    return sign * (1.0 - poly * np.exp(-x * x))


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLm:
    """The model in `model_dir` (config.json, tokenizer.json, model.safetensors)."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.config = json.load(f)
        max_len = 256
        st_path = os.path.join(model_dir, "sentence_bert_config.json")
        if os.path.exists(st_path):
            with open(st_path) as f:
                max_len = json.load(f)["max_seq_length"]
        self.tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_len)
        raw = load_file(os.path.join(model_dir, "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items()}

    def _linear(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _norm(self, x, name):
        eps = self.config["layer_norm_eps"]
        return _layer_norm(x, self.w[name + ".weight"], self.w[name + ".bias"], eps)

    def embed_one(self, text):
        """The unit vector of one text."""
        enc = self.tokenizer.encode(text)
        ids = np.array(enc.ids)
        types = np.array(enc.type_ids)
        n = len(ids)
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(n)]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        heads = self.config["num_attention_heads"]
        head_dim = self.config["hidden_size"] // heads
        for i in range(self.config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def split(t):
                return t.reshape(n, heads, head_dim).transpose(1, 0, 2)

            q = split(self._linear(x, p + "attention.self.query"))
            k = split(self._linear(x, p + "attention.self.key"))
            v = split(self._linear(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(1, 0, 2).reshape(n, heads * head_dim)
            attn = self._linear(ctx, p + "attention.output.dense")
            x = self._norm(attn + x, p + "attention.output.LayerNorm")
            hidden = _gelu(self._linear(x, p + "intermediate.dense"))
            out = self._linear(hidden, p + "output.dense")
            x = self._norm(out + x, p + "output.LayerNorm")
        mean = x.mean(axis=0)
        return mean / max(np.linalg.norm(mean), 1e-12)


_MODELS = {}


def embed(texts, model_dir=None):
    """One unit vector (a list of floats) per text, with the model at `model_dir` (default:
    $WAYPOINT_TEST_MINILM_DIR)."""
    model_dir = model_dir or os.environ["WAYPOINT_TEST_MINILM_DIR"]
    if model_dir not in _MODELS:
        _MODELS[model_dir] = MiniLm(model_dir)
    model = _MODELS[model_dir]
    return [model.embed_one(t).tolist() for t in texts]


if __name__ == "__main__":
    texts = json.load(sys.stdin)
    json.dump(embed(texts, sys.argv[1] if len(sys.argv) > 1 else None), sys.stdout)
