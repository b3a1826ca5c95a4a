/**
 * The process and host facts of Iggy's `Stats` (GET /stats) that are not metadata: memory, CPU,
 * run time, OS. Behind a function so tests get fixed values and the node layer can add what only
 * it knows (disk space of the data directory, bytes read and written).
 */
import { arch, freemem, hostname, release, totalmem, type as osType, version as osVersion } from 'node:os';
import { cpuUsage, memoryUsage, pid, uptime } from 'node:process';

export interface SystemInfo {
  readonly processId: number;
  /** Percent of one CPU over the process lifetime. */
  readonly cpuUsagePercent: number;
  readonly totalCpuUsagePercent: number;
  readonly memoryUsageBytes: number;
  readonly totalMemoryBytes: number;
  readonly availableMemoryBytes: number;
  readonly runTimeUs: number;
  readonly startTimeUs: number;
  readonly readBytes: number;
  readonly writtenBytes: number;
  readonly hostname: string;
  readonly osName: string;
  readonly osVersion: string;
  readonly kernelVersion: string;
  readonly threadsCount: number;
  readonly freeDiskSpaceBytes: number;
  readonly totalDiskSpaceBytes: number;
}

/** What the process can tell about itself without IO; disk and IO counters are 0 (unknown). */
export function processSystemInfo(nowMs: () => number = Date.now): SystemInfo {
  const runTimeUs = Math.round(uptime() * 1_000_000);
  const cpu = cpuUsage();
  const cpuUs = cpu.user + cpu.system;
  return {
    processId: pid,
    cpuUsagePercent: runTimeUs > 0 ? (cpuUs / runTimeUs) * 100 : 0,
    totalCpuUsagePercent: 0,
    memoryUsageBytes: memoryUsage.rss(),
    totalMemoryBytes: totalmem(),
    availableMemoryBytes: freemem(),
    runTimeUs,
    startTimeUs: nowMs() * 1000 - runTimeUs,
    readBytes: 0,
    writtenBytes: 0,
    hostname: hostname(),
    osName: osType(),
    osVersion: osVersion(),
    kernelVersion: `${release()} ${arch()}`,
    // Node runs JS on one thread; libuv's pool is an implementation detail we do not count.
    threadsCount: 1,
    freeDiskSpaceBytes: 0,
    totalDiskSpaceBytes: 0,
  };
}
