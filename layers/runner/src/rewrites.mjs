// Source rewrites of the bundler (bundle.mjs), pure text to text.

// esbuild writes an external `require("x")` in ES module output as its `__require("x")` shim;
// the bundle pass must see a real `require` to install and bundle the package.
export function realRequires(code) {
  return code.replace(/\b__require\(("(?:[^"\\\n]|\\.)*")\)/g, 'require($1)')
}

// `require(__dirname + "/file.js")` (or `path.join(__dirname, "file.js")`) in a package reads a
// file next to it, which a bundle does not have: as a static `require("./file.js")` esbuild
// bundles the file (pg-format's reserved words).
export function staticDirnameRequires(text) {
  return text
    .replace(/require\(\s*__dirname\s*\+\s*(['"])\/([^'"\n]+)\1\s*\)/g, (_, q, rel) => `require(${q}./${rel}${q})`)
    .replace(/require\(\s*(?:path\.)?(?:join|resolve)\(\s*__dirname\s*,\s*(['"])\.?\/?([^'"\n]+)\1\s*\)\s*\)/g, (_, q, rel) => `require(${q}./${rel}${q})`)
}
