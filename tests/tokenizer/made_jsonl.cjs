// JSON Lines made from the sentences of text files, for the tokenizer tests
// (choices.sh, sft.sh): the same lines on every run (a fixed linear
// congruential sequence), JSON.stringify's escapes, one blank line.
//   made_jsonl.cjs choices OUT FILE...   300 HellaSwag-style examples: ctx,
//                                        2 to 5 endings, label (seed 7)
//   made_jsonl.cjs pairs OUT FILE...     200 question/answer pairs, the
//                                        8th answer empty, fields in two
//                                        orders (seed 11)
"use strict";
const fs = require("fs");

const [kind, out, ...files] = process.argv.slice(2);
const text = files.map((f) => fs.readFileSync(f, "utf8")).join("\n");
const sentences = text.split(/(?<=[.!?。])\s+/).map((s) => s.trim()).filter((s) => s.length > 3);
let seed = kind === "choices" ? 7 : 11;
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return Math.floor(seed / 65536) % n; };
const pick = (len) => sentences[rand(sentences.length)].slice(0, len);
const lines = [];
if (kind === "choices") {
  for (let i = 0; i < 300; i++) {
    const n = 2 + rand(4);
    const endings = Array.from({ length: n }, () => pick(30));
    lines.push(JSON.stringify({ ind: i, ctx: pick(160), endings, label: rand(n), split: "val" }));
    if (i === 150) lines.push("");
  }
} else if (kind === "pairs") {
  for (let i = 0; i < 200; i++) {
    const q = pick(120);
    const a = i === 7 ? "" : " " + pick(80);
    lines.push(i % 2 ? JSON.stringify({ question: q, answer: a }) : JSON.stringify({ answer: a, id: i, question: q }));
    if (i === 100) lines.push("");
  }
} else {
  console.error("usage: made_jsonl.cjs choices|pairs OUT FILE...");
  process.exit(2);
}
fs.writeFileSync(out, lines.join("\n") + "\n");
