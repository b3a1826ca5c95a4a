/**
 * Node-local reads (never forwarded, as Iggy's "local" route group): stats, cluster metadata and
 * status, clients, and metrics (`metricsRoutes`). Served by whichever replica is asked, from its own state.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ErrorCode } from '../../metadata/errors.js';
import { OPTION_KIND_NAMES, optionCatalog, optionsScopeOf } from '../../metadata/options.js';
import { canReadServers } from '../../metadata/permissions.js';
import type { HttpContext } from '../context.js';
import { iggyError, notFound, unauthorized } from '../errors.js';
import { formatBytes, renderClient, renderClientDetails, renderClusterMetadata, renderClusterStatus } from '../render.js';
import {
  ClientInfo,
  ClientInfoDetails,
  ClientParams,
  ClusterMetadata,
  ClusterStatus,
  OptionSpec,
  OptionsScopeParams,
  Stats,
  responses,
  type StatsJson,
} from '../schemas.js';

/** `iggy_server_semver` packs major.minor.patch as major * 1e6 + minor * 1e3 + patch (Iggy). */
function semverOf(version: string): number | null {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})/.exec(version);
  if (match === null) return null;
  return Number(match[1]) * 1_000_000 + Number(match[2]) * 1000 + Number(match[3]);
}

export const systemRoutes: FastifyPluginAsyncTypebox<{ ctx: HttpContext }> = async (app, { ctx }) => {
  const { node } = ctx;

  // Iggy `describe_options`: any authenticated caller (the catalog is not resource-scoped); an
  // unknown scope is InvalidCommand (400).
  app.get(
    '/options/:scope',
    { schema: { params: OptionsScopeParams, response: responses({ 200: Type.Array(OptionSpec) }) } },
    async (request) => {
      // In the authenticated scope: a request without a valid token was answered 401 already.
      const scope = optionsScopeOf(request.params.scope);
      if (scope === null) throw iggyError(ErrorCode.invalidCommand);
      return optionCatalog(scope).map((spec) => ({
        key: spec.key,
        kind: OPTION_KIND_NAMES[spec.kind],
        default_value: Array.from(spec.defaultValue),
        description: spec.description,
      }));
    },
  );

  app.get('/stats', { schema: { response: responses({ 200: Stats }) } }, async (request): Promise<StatsJson> => {
    if (!canReadServers(ctx.identity(request).principal)) throw unauthorized();
    const metadata = node.state.queries.statsView();
    const system = ctx.systemInfo();
    return {
      process_id: system.processId,
      cpu_usage: system.cpuUsagePercent,
      total_cpu_usage: system.totalCpuUsagePercent,
      memory_usage: formatBytes(system.memoryUsageBytes),
      total_memory: formatBytes(system.totalMemoryBytes),
      available_memory: formatBytes(system.availableMemoryBytes),
      run_time: system.runTimeUs,
      start_time: system.startTimeUs,
      read_bytes: formatBytes(system.readBytes),
      written_bytes: formatBytes(system.writtenBytes),
      messages_size_bytes: formatBytes(metadata.messagesSizeBytes),
      streams_count: metadata.streamsCount,
      topics_count: metadata.topicsCount,
      partitions_count: metadata.partitionsCount,
      segments_count: metadata.segmentsCount,
      messages_count: metadata.messagesCount,
      clients_count: node.clients().length,
      consumer_groups_count: metadata.consumerGroupsCount,
      hostname: system.hostname,
      os_name: system.osName,
      os_version: system.osVersion,
      kernel_version: system.kernelVersion,
      iggy_server_version: ctx.serverVersion,
      iggy_server_semver: semverOf(ctx.serverVersion),
      cache_metrics: {},
      threads_count: system.threadsCount,
      free_disk_space: formatBytes(system.freeDiskSpaceBytes),
      total_disk_space: formatBytes(system.totalDiskSpaceBytes),
    };
  });

  // Any authenticated caller (Iggy: "auth-only, never RBAC-gated").
  app.get('/cluster/metadata', { schema: { response: responses({ 200: ClusterMetadata }) } }, async () =>
    renderClusterMetadata(node.clusterName, node.nodes()),
  );

  // vrmeta's addition (DESIGN.md §2.3): no secrets, readable with any valid token.
  app.get('/cluster/status', { schema: { response: responses({ 200: ClusterStatus }) } }, async () =>
    renderClusterStatus(node.status()),
  );

  app.get('/clients', { schema: { response: responses({ 200: Type.Array(ClientInfo) }) } }, async (request) => {
    if (!canReadServers(ctx.identity(request).principal)) throw unauthorized();
    // Ordered by client id, as Iggy's `clients_from_wire` sorts them.
    return [...node.clients()].sort((left, right) => left.clientId - right.clientId).map(renderClient);
  });

  app.get(
    '/clients/:client_id',
    { schema: { params: ClientParams, response: responses({ 200: ClientInfoDetails }) } },
    async (request) => {
      if (!canReadServers(ctx.identity(request).principal)) throw unauthorized();
      const wanted = Number(request.params.client_id);
      const client = node.clients().find((candidate) => candidate.clientId === wanted);
      if (client === undefined) throw notFound();
      return renderClientDetails(client);
    },
  );
};

/**
 * GET /metrics, registered by app.ts in the authenticated scope (the default, as Iggy: any valid
 * bearer, Prometheus sends it via `authorization`) or, with `metrics_public`, in the public one.
 */
export const metricsRoutes: FastifyPluginAsyncTypebox<{ ctx: HttpContext }> = async (app, { ctx }) => {
  app.get('/metrics', { schema: { response: responses({ 200: Type.String() }) } }, async (_request, reply) => {
    const text = await ctx.metrics.registry.metrics();
    return reply.type(ctx.metrics.registry.contentType).send(text);
  });
};
