/**
 * `vrmeta dev` log lines: readable on a terminal, pino JSON otherwise.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { chooseLogFormat, lineFormatter } from '../../src/node/log-format.js';

const RECORD = JSON.stringify({ level: 40, time: Date.UTC(2026, 11, 1, 17, 39, 1, 366), replica: 1, view: 2, reason: 'heartbeat_timeout', msg: 'view change' });

describe('dev log format', () => {
  it('loads pino-pretty only for the pretty format (vrmeta dev spawns its replicas first)', () => {
    const prettyLoaded = (): boolean => Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('/pino-pretty/'));
    expect(prettyLoaded()).toBe(false);
    lineFormatter('json', { colorize: false });
    expect(prettyLoaded()).toBe(false);
    lineFormatter('pretty', { colorize: false });
    expect(prettyLoaded()).toBe(true);
  });

  it('auto is pretty on a terminal and JSON otherwise; explicit choices win; others are refused', () => {
    expect(chooseLogFormat('auto', true)).toBe('pretty');
    expect(chooseLogFormat('auto', false)).toBe('json');
    expect(chooseLogFormat('json', true)).toBe('json');
    expect(chooseLogFormat('pretty', false)).toBe('pretty');
    expect(() => chooseLogFormat('yaml', true)).toThrow(/--log-format must be one of auto, pretty, json/);
  });

  it('json passes every line through byte for byte', () => {
    const format = lineFormatter('json', { colorize: true });
    expect(format(RECORD)).toBe(RECORD);
  });

  it('pretty renders a pino record as one readable line with its level, message and fields', () => {
    const line = lineFormatter('pretty', { colorize: false })(RECORD);
    expect(line).not.toContain('\n');
    expect(line).not.toContain('{"level"');
    expect(line).toMatch(/WARN/);
    expect(line).toContain('view change');
    expect(line).toContain('"reason":"heartbeat_timeout"');
    // The prefix already names the replica.
    expect(line).not.toContain('"replica"');
  });

  it('pretty colours only when asked', () => {
    expect(lineFormatter('pretty', { colorize: true })(RECORD)).toContain('\x1b[');
    expect(lineFormatter('pretty', { colorize: false })(RECORD)).not.toContain('\x1b[');
  });

  it('pretty leaves lines that are not pino records alone', () => {
    const format = lineFormatter('pretty', { colorize: false });
    for (const line of ['vrmeta: listening', '{not json', '{"no":"level"}', '']) expect(format(line)).toBe(line);
  });
});
