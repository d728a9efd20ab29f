#!/usr/bin/python3
"""A chat rendered by a model's own chat template, as transformers'
apply_chat_template renders it (Jinja2's sandboxed environment with
trim_blocks and lstrip_blocks, raise_exception, bos_token and eos_token
from tokenizer_config.json, add_generation_prompt = True), for
tests/tokenizer/chat.sh.
Usage: chat_render.py TOKENIZER_CONFIG OUT SYSTEM USER [no_think]
       chat_render.py TOKENIZER_CONFIG OUT --messages FILE [no_think]
(SYSTEM "": no system message; FILE: a JSON list of {"role", "content"}
messages; no_think: enable_thinking = False, Qwen3's switch). Writes the
rendered text to OUT (UTF-8)."""
import json
import sys

from jinja2.sandbox import ImmutableSandboxedEnvironment


def token_text(t):
    """A tokenizer_config.json token: a string, an AddedToken object, or null."""
    if isinstance(t, dict):
        return t.get("content", "")
    return t or ""


def main():
    if len(sys.argv) not in (5, 6) or (len(sys.argv) == 6 and sys.argv[5] != "no_think"):
        sys.exit(__doc__)
    cfg = json.load(open(sys.argv[1], encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message):
        raise RuntimeError(message)

    env.globals["raise_exception"] = raise_exception
    if sys.argv[3] == "--messages":
        messages = json.load(open(sys.argv[4], encoding="utf-8"))
    else:
        system, user = sys.argv[3], sys.argv[4]
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    extra = {"enable_thinking": False} if len(sys.argv) == 6 else {}
    text = env.from_string(cfg["chat_template"]).render(
        messages=messages, add_generation_prompt=True, **extra,
        bos_token=token_text(cfg.get("bos_token")), eos_token=token_text(cfg.get("eos_token")))
    with open(sys.argv[2], "w", encoding="utf-8", newline="") as f:
        f.write(text)


if __name__ == "__main__":
    main()
