"""A small random-weight Whisper model with the real 30-second window (3000 mel frames,
1500 positions), saved as a Hugging Face folder: the tests' Whisper."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def tiny_whisper(path: Path) -> Path:
    """The model saved at ``path`` (needs torch and transformers); its weights moved away
    from the tiny initialisation, the sinusoidal positions kept."""
    import torch
    from transformers import WhisperConfig, WhisperModel

    torch.manual_seed(0)
    settings: dict[str, Any] = {"attn_implementation": "eager"}
    config = WhisperConfig(
        **settings,
        d_model=64,
        encoder_layers=2,
        encoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_layers=1,
        decoder_attention_heads=4,
        decoder_ffn_dim=64,
        num_mel_bins=80,
        max_source_positions=1500,
        max_target_positions=32,
        vocab_size=100,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    model: Any = WhisperModel(config)
    model.eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" not in name:
                noise = torch.randn_like(parameter)
                parameter.copy_(1 + 0.1 * noise if "norm" in name else 0.1 * noise)
    model.save_pretrained(path)
    return Path(path)


def whisper_reference(folder: Path, features: Any) -> Any:
    """transformers' encoder states (1, 1500, d_model) of ``features`` (1, 80, 3000), as
    float64."""
    import numpy as np
    import torch
    from transformers import WhisperModel

    model: Any = WhisperModel.from_pretrained(folder, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        states = model.encoder(torch.from_numpy(features)).last_hidden_state.numpy()
    return np.asarray(states, np.float64)
