#!/usr/bin/python3
"""Gemma's tokenizer as the chat tests use it (chat.sh, chat_sft.sh): npm's
tokenizer.json and tokenizer_config.json in SRC get Gemma 1.1's and 2's
instruct chat template (TEMPLATE: tests/tokenizer/gemma_chat_template.json);
with IT, IT gets the same config and the instruct models' tokenizer.json,
npm's with <start_of_turn> and <end_of_turn> (vocabulary pieces 106 and 107
there) listed as added tokens, as the instruct models list them.
Usage: gemma_config.py SRC TEMPLATE [IT]"""
import json
import sys

if len(sys.argv) not in (3, 4):
    sys.exit(__doc__)
src, template = sys.argv[1], sys.argv[2]
dirs = [src] + sys.argv[3:]
cfg = json.load(open(src + "/tokenizer_config.json", encoding="utf-8"))
cfg["chat_template"] = json.load(open(template, encoding="utf-8"))["chat_template"]
for d in dirs:
    json.dump(cfg, open(d + "/tokenizer_config.json", "w", encoding="utf-8"), indent=2)
if len(dirs) == 2:
    tj = json.load(open(src + "/tokenizer.json", encoding="utf-8"))
    for i, t in ((106, "<start_of_turn>"), (107, "<end_of_turn>")):
        assert tj["model"]["vocab"][t] == i and all(a["content"] != t for a in tj["added_tokens"])
        tj["added_tokens"].append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                                   "normalized": False, "special": True})
    json.dump(tj, open(dirs[1] + "/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
