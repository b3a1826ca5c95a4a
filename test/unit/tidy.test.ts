/**
 * Tidy: the module boundaries that keep the core deterministic (STYLE.md "Layout and
 * boundaries"). `src/vsr` and `src/metadata` run under the seeded simulator, so they may not
 * touch the clock, randomness, timers, the process, real IO or async; imports point downward only.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = new URL('../../', import.meta.url).pathname;

function sources(directory: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(directory)) {
    const path = join(directory, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

/** Strips comments and string contents so prose like "no Date" does not trip the checks. */
function code(text: string): string {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '')
    .replace(/`(?:\\.|[^`\\])*`/g, '``')
    .replace(/'(?:\\.|[^'\\])*'/g, "''");
}

function importsOf(text: string): string[] {
  return [...text.matchAll(/(?:import|export)[^'"]*?from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/g)].map(
    (match) => match[1] ?? match[2]!,
  );
}

/** Packages the pure layers may use: deterministic, no IO. */
const PURE_PACKAGES = new Set(['msgpackr']);

const FORBIDDEN_GLOBALS = [
  /\bDate\b/,
  /\bMath\.random\b/,
  /\bsetTimeout\b/,
  /\bsetInterval\b/,
  /\bsetImmediate\b/,
  /\bqueueMicrotask\b/,
  /\bprocess\b/,
  /\bperformance\b/,
  /\basync\b/,
  /\bawait\b/,
  /\bWeakRef\b/,
  /\bFinalizationRegistry\b/,
];

/** Layers a module may import from, by top-level folder under src/. */
const ALLOWED_LAYERS: Record<string, readonly string[]> = {
  vsr: ['vsr', 'stdx', 'constants.ts', 'kernels/kernel.ts', 'metadata/snapshot-model.ts'],
  metadata: ['metadata', 'stdx', 'constants.ts', 'kernels/kernel.ts', 'vsr/state-machine.ts'],
  kernels: ['kernels', 'stdx', 'constants.ts', 'metadata/snapshot-model.ts'],
};

describe('tidy', () => {
  for (const layer of ['vsr', 'metadata'] as const) {
    it(`src/${layer} is pure: no node:*, clock, randomness, timers, process or async`, () => {
      const problems: string[] = [];
      for (const file of sources(join(root, 'src', layer))) {
        const text = code(readFileSync(file, 'utf8'));
        const name = relative(root, file);
        for (const specifier of importsOf(readFileSync(file, 'utf8'))) {
          if (!specifier.startsWith('.') && !PURE_PACKAGES.has(specifier)) {
            problems.push(`${name} imports ${specifier}`);
          }
        }
        for (const pattern of FORBIDDEN_GLOBALS) {
          if (pattern.test(text)) problems.push(`${name} uses ${pattern.source}`);
        }
      }
      expect(problems).toEqual([]);
    });
  }

  for (const [layer, allowed] of Object.entries(ALLOWED_LAYERS)) {
    it(`src/${layer} imports only from ${allowed.join(', ')}`, () => {
      const problems: string[] = [];
      for (const file of sources(join(root, 'src', layer))) {
        for (const specifier of importsOf(readFileSync(file, 'utf8'))) {
          if (!specifier.startsWith('.')) continue;
          const target = relative(join(root, 'src'), join(file, '..', specifier)).replace(/\.js$/, '.ts');
          const ok = allowed.some((prefix) => target === prefix || target.startsWith(`${prefix}/`));
          if (!ok) problems.push(`${relative(root, file)} imports ${target}`);
        }
      }
      expect(problems).toEqual([]);
    });
  }
  it('test/cluster and bench start long-lived child processes only through bench/procs.ts', () => {
    // One module kills whole process groups, bounds log tails, removes temp roots and counts what
    // is left (issue 16): a second copy drifts (the harness once killed only the leader). Children
    // that are waited for on the spot (spawnSync, execFileSync, execSync) cannot leak.
    const SYNC_ONLY = new Set(['spawnSync', 'execFileSync', 'execSync']);
    const problems: string[] = [];
    for (const directory of ['test/cluster', 'bench']) {
      for (const file of sources(join(root, directory))) {
        const name = relative(root, file);
        if (name === 'bench/procs.ts') continue;
        const text = readFileSync(file, 'utf8');
        if (/import\(\s*'node:child_process'\s*\)|require\(\s*'node:child_process'\s*\)/.test(text)) problems.push(`${name} loads node:child_process dynamically`);
        for (const match of text.matchAll(/import\s*\{([^}]*)\}\s*from\s*'(?:node:)?child_process'/g)) {
          for (const imported of match[1]!.split(',').map((part) => part.trim()).filter((part) => part.length > 0 && !part.startsWith('type '))) {
            if (!SYNC_ONLY.has(imported.split(/\s+as\s+/)[0]!)) problems.push(`${name} imports ${imported} from node:child_process`);
          }
        }
        if (/import\s+(?:\*\s+as\s+\w+|\w+)\s+from\s*'(?:node:)?child_process'/.test(text)) problems.push(`${name} imports all of node:child_process`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('the server seeds every PRNG from node:crypto, never from a number (nonces must not be guessable)', () => {
    // A numeric seed carries at most 32 bits (and a clock-derived one far fewer): only the
    // simulator may replay a seed. Real replicas take Prng.fromSeedBytes(randomBytes(16)).
    const problems: string[] = [];
    for (const file of sources(join(root, 'src', 'node'))) {
      if (/new\s+Prng\s*\(/.test(code(readFileSync(file, 'utf8')))) problems.push(relative(root, file));
    }
    expect(problems).toEqual([]);
  });
});
