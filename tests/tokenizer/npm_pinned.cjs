// The tokenizer tests' npm packages, pinned and installed by scripts/deps.sh
// into .deps/npm (PENTAD_NPM_DIR overrides). pinned(pkg, version) returns
// require for the package and its subpaths (sub omitted: the package), or
// ends the process with exit code 2 and a message saying how to install it.
"use strict";
const fs = require("fs");
const path = require("path");

const npmDir = process.env.PENTAD_NPM_DIR || path.join(__dirname, "..", "..", ".deps", "npm");

function pinned(pkg, version) {
  let meta;
  try {
    meta = JSON.parse(fs.readFileSync(path.join(npmDir, "node_modules", pkg, "package.json"), "utf8"));
  } catch (e) {
    console.error(`FAIL: ${pkg} is not installed under ${npmDir}/node_modules: run scripts/deps.sh ` +
                  `(it runs: npm install --prefix ${npmDir} ${pkg}@${version})`);
    process.exit(2);
  }
  if (meta.version !== version) {
    console.error(`FAIL: ${pkg} ${meta.version} under ${npmDir}, the tests pin ${version}: run scripts/deps.sh`);
    process.exit(2);
  }
  return (sub) => require(require.resolve(sub ? `${pkg}/${sub}` : pkg, { paths: [npmDir] }));
}

module.exports = { pinned, npmDir };
