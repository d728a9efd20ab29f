#!/usr/bin/python3
"""A chat rendered by a model's own chat template, as transformers'
apply_chat_template renders it (Jinja2's sandboxed environment with
trim_blocks and lstrip_blocks, raise_exception and strftime_now (the local
time's datetime.now().strftime), bos_token and eos_token from
tokenizer_config.json, add_generation_prompt = True), for
tests/tokenizer/chat.sh.
Usage: chat_render.py TOKENIZER_CONFIG OUT SYSTEM USER [no_think] [date=DATE]
       chat_render.py TOKENIZER_CONFIG OUT --messages FILE [no_think] [date=DATE]
(SYSTEM "": no system message; FILE: a JSON list of {"role", "content"}
messages; no_think: enable_thinking = False, Qwen3's switch; date=DATE:
date_string = DATE, Llama 3.1+'s date). Writes the rendered text to OUT
(UTF-8)."""
import json
import sys
from datetime import datetime

from jinja2.sandbox import ImmutableSandboxedEnvironment


def token_text(t):
    """A tokenizer_config.json token: a string, an AddedToken object, or null."""
    if isinstance(t, dict):
        return t.get("content", "")
    return t or ""


def render(cfg, messages, add_generation_prompt=True, **extra):
    """The chat template of tokenizer_config.json `cfg` rendered over messages."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message):
        raise RuntimeError(message)

    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(cfg["chat_template"]).render(
        messages=messages, add_generation_prompt=add_generation_prompt, **extra,
        bos_token=token_text(cfg.get("bos_token")), eos_token=token_text(cfg.get("eos_token")))


def main():
    opts = sys.argv[5:]
    if len(sys.argv) < 5 or any(o != "no_think" and not o.startswith("date=") for o in opts):
        sys.exit(__doc__)
    cfg = json.load(open(sys.argv[1], encoding="utf-8"))
    if sys.argv[3] == "--messages":
        messages = json.load(open(sys.argv[4], encoding="utf-8"))
    else:
        system, user = sys.argv[3], sys.argv[4]
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    extra = {"enable_thinking": False} if "no_think" in opts else {}
    extra.update({"date_string": o[5:] for o in opts if o.startswith("date=")})
    text = render(cfg, messages, True, **extra)
    with open(sys.argv[2], "w", encoding="utf-8", newline="") as f:
        f.write(text)


if __name__ == "__main__":
    main()
