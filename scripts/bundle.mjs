/**
 * Bundles the CLI (`dist/src/node/cli.js`, what tsc wrote) and its pure-JS dependencies into
 * `dist/bundle/`: the package's `bin` and `npm start` run `dist/bundle/cli.js`.
 *
 * Why: a replica's boot was mostly module loading. Node 20 resolves, reads and links every file of
 * an ESM graph one by one (typebox alone is ~700 files) and has no compile cache; the same code in
 * a few chunks boots in roughly two thirds of the time (`vrmeta bench restart --baseline-cli
 * dist/src/node/cli.js` compares the two in one run). Dynamic imports stay separate chunks, so
 * what the server defers to first use (jose, the TypeBox compiler, the benches' entry) stays lazy.
 *
 * Kept external: node built-ins, native addons (@node-rs/*: a .node file cannot be bundled) and
 * pino-pretty (loaded by path through createRequire). Everything else resolves from node_modules
 * at build time. The entry and its chunks share one directory below dist/, as dist/src/<layer>/
 * files do, so the `import.meta.url`-relative paths the code uses (build/*.wasm, the dev
 * cluster's child entry `./cli.js`; the bench entry has a candidate for each) resolve from both.
 */
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';

const root = fileURLToPath(new URL('../', import.meta.url));
const outDir = `${root}dist/bundle`;

rmSync(outDir, { recursive: true, force: true });
await build({
  // The checkpoint worker is an entry of its own: the driver starts `./checkpoint-worker.js` next
  // to itself, which is dist/bundle/checkpoint-worker.js here as it is dist/src/node/ unbundled.
  input: { cli: `${root}dist/src/node/cli.js`, 'checkpoint-worker': `${root}dist/src/node/checkpoint-worker.js` },
  platform: 'node',
  external: [/^node:/, /^@node-rs\//, /^pino-pretty(\/|$)/],
  logLevel: 'warn',
  output: {
    dir: outDir,
    format: 'esm',
    entryFileNames: '[name].js',
    chunkFileNames: '[name]-[hash].js',
    sourcemap: true,
  },
});
