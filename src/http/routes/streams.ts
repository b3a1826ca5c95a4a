/**
 * Streams, topics, partitions and segments (Iggy's stream/topic routes), in the control-plane
 * scope: on a backup, writes are forwarded to the primary before they run here.
 *
 * Reads follow Iggy's gate order: resolve the target first (a miss is the legacy 404 body), then
 * check the read permission (403), then answer. Writes validate the request shape, resolve topic
 * defaults on this node (defaults.ts: the log never carries a 0 sentinel), precheck, commit, and
 * answer creates with the object read back from the local state.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import {
  resolveTopicSettings,
  validateCompression,
  validateMaxTopicSize,
  validateMessageExpiry,
  validateReplicationFactor,
  validateTopicSettings,
  type TopicDefaults,
} from '../../metadata/defaults.js';
import { MIN_TOPIC_SEGMENT_SIZE, parseTopicCreateOptions, parseTopicUpdateOptions, topicSegmentSizeBytes } from '../../metadata/options.js';
import { CompressionAlgorithm } from '../../format/snapshot-model.js';
import { idOf, Operation, type Identifier } from '../../metadata/operations.js';
import { canReadStream, canReadStreams, canReadTopic, canReadTopics } from '../../metadata/permissions.js';
import { validatePartitionsChangeCount, validateStreamName, validateTopicName, validateTopicPartitionsCount } from '../../metadata/validation.js';
import type { HttpContext } from '../context.js';
import { notFound, unauthorized, unprocessableBody } from '../errors.js';
import { JSON_TYPE, listReadsOf } from '../list-reads.js';
import { compressionCode, renderStream, renderStreamDetails, renderTopic, renderTopicDetails } from '../render.js';
import { check, createdId, createdView, noOptions, optionRefused, pathIdentifier, u64Field } from '../requests.js';
import {
  CreateStreamBody,
  CreateTopicBody,
  Empty,
  PartitionParams,
  PartitionsCountBody,
  PartitionsCountQuery,
  SegmentsCountQuery,
  Stream,
  StreamDetails,
  StreamParams,
  Topic,
  TopicDetails,
  TopicParams,
  UpdateStreamBody,
  UpdateTopicBody,
  responses,
  type UpdateTopicBodyJson,
} from '../schemas.js';
import { resolveTopicIds } from './resolve.js';

function compressionOf(name: string): number {
  const code = compressionCode(name);
  if (code === null) throw unprocessableBody('compression_algorithm', `unknown compression algorithm "${name}" (none, gzip)`);
  return code;
}

/** An update's present u64 setting: the 0 sentinel means "server default", resolved here. */
function updatedU64(value: number | bigint | null | undefined, field: string, defaultValue: bigint): bigint | null {
  if (value === undefined || value === null) return null;
  const u64 = u64Field(value, field);
  return u64 === 0n ? defaultValue : u64;
}

/**
 * An update's settings: the named body fields fold into the same option keys as `options` (Iggy
 * `TopicUpdateOptions`), a named field winning on collision; only the updatable keys are accepted.
 */
function updateSettings(body: UpdateTopicBodyJson, defaults: TopicDefaults) {
  const fromOptions = parseTopicUpdateOptions(body.options ?? {});
  if ('code' in fromOptions) throw optionRefused(fromOptions);
  const compressionAlgorithm =
    body.compression_algorithm === undefined || body.compression_algorithm === null
      ? fromOptions.compressionAlgorithm
      : compressionOf(body.compression_algorithm);
  const messageExpiryUs = updatedU64(body.message_expiry ?? fromOptions.messageExpiryUs, 'message_expiry', defaults.messageExpiryUs);
  const maxTopicSizeBytes = updatedU64(body.max_topic_size ?? fromOptions.maxTopicSizeBytes, 'max_topic_size', defaults.maxTopicSizeBytes);
  const replicationFactor = body.replication_factor ?? null;
  if (compressionAlgorithm !== null) check(validateCompression(compressionAlgorithm));
  if (messageExpiryUs !== null) check(validateMessageExpiry(messageExpiryUs));
  // The floor against the topic's own segment size is checked at apply, where the topic is known.
  if (maxTopicSizeBytes !== null) check(validateMaxTopicSize(maxTopicSizeBytes, MIN_TOPIC_SEGMENT_SIZE));
  if (replicationFactor !== null) check(validateReplicationFactor(replicationFactor));
  return { compressionAlgorithm, messageExpiryUs, maxTopicSizeBytes, replicationFactor };
}

export const streamRoutes: FastifyPluginAsyncTypebox<{ ctx: HttpContext }> = async (app, { ctx }) => {
  const { queries } = ctx.node.state;

  // ------------------------------------------------------------------------------- streams

  app.get('/streams', { schema: { response: responses({ 200: Type.Array(Stream) }) } }, async (request, reply) => {
    if (!canReadStreams(ctx.identity(request).principal)) throw unauthorized();
    // Built in slices and shared per state version (list-reads.ts); each element serialized as
    // the route's schema would, so the text is what serializing the whole array gives.
    const serialize = reply.compileSerializationSchema(Stream as unknown as Record<string, unknown>);
    const json = await listReadsOf(ctx.node.state).streamsJson('GET /streams', (view) => serialize(renderStream(view)));
    // The schema types the body as the objects it describes; this is their text.
    return reply.type(JSON_TYPE).send(json as never);
  });

  app.post('/streams', { schema: { body: CreateStreamBody, response: responses({ 200: StreamDetails }) } }, async (request) => {
    const { name, options } = request.body;
    noOptions(options);
    check(validateStreamName(name));
    const id = createdId(await ctx.submit(request, { operation: Operation.createStream, name }));
    return renderStreamDetails(createdView(queries.stream(idOf(id))));
  });

  app.get('/streams/:stream_id', { schema: { params: StreamParams, response: responses({ 200: StreamDetails }) } }, async (request) => {
    const stream = queries.stream(pathIdentifier(request.params.stream_id));
    if (stream === null) throw notFound();
    if (!canReadStream(ctx.identity(request).principal, stream.id)) throw unauthorized();
    return renderStreamDetails(stream);
  });

  app.put(
    '/streams/:stream_id',
    { schema: { params: StreamParams, body: UpdateStreamBody, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      const { name, options } = request.body;
      noOptions(options);
      check(validateStreamName(name));
      await ctx.submit(request, { operation: Operation.updateStream, streamId: pathIdentifier(request.params.stream_id), name });
      return reply.code(204).send();
    },
  );

  app.delete('/streams/:stream_id', { schema: { params: StreamParams, response: responses({ 204: Empty }) } }, async (request, reply) => {
    await ctx.submit(request, { operation: Operation.deleteStream, streamId: pathIdentifier(request.params.stream_id) });
    return reply.code(204).send();
  });

  app.delete('/streams/:stream_id/purge', { schema: { params: StreamParams, response: responses({ 204: Empty }) } }, async (request, reply) => {
    await ctx.submit(request, { operation: Operation.purgeStream, streamId: pathIdentifier(request.params.stream_id) });
    return reply.code(204).send();
  });

  // -------------------------------------------------------------------------------- topics

  app.get(
    '/streams/:stream_id/topics',
    { schema: { params: StreamParams, response: responses({ 200: Type.Array(Topic) }) } },
    async (request) => {
      const stream = queries.stream(pathIdentifier(request.params.stream_id));
      if (stream === null) throw notFound();
      if (!canReadTopics(ctx.identity(request).principal, stream.id)) throw unauthorized();
      return stream.topics.map(renderTopic);
    },
  );

  app.post(
    '/streams/:stream_id/topics',
    { schema: { params: StreamParams, body: CreateTopicBody, response: responses({ 200: TopicDetails }) } },
    async (request) => {
      const input = request.body;
      check(validateTopicName(input.name));
      check(validateTopicPartitionsCount(input.partitions_count));
      // Iggy's create: a named field counts as set (explicit) unless it is the default / 0
      // sentinel; `options` may carry any catalog key, a named field winning on collision.
      const compression = compressionOf(input.compression_algorithm);
      const options = parseTopicCreateOptions({
        raw: input.options ?? {},
        compressionAlgorithm: compression === CompressionAlgorithm.none ? null : compression,
        messageExpiryUs: u64Field(input.message_expiry, 'message_expiry'),
        maxTopicSizeBytes: u64Field(input.max_topic_size, 'max_topic_size'),
        partitionsCount: input.partitions_count,
      });
      if ('code' in options) throw optionRefused(options);
      const settings = resolveTopicSettings(
        {
          messageExpiryUs: options.messageExpiryUs,
          maxTopicSizeBytes: options.maxTopicSizeBytes,
          compressionAlgorithm: options.compressionAlgorithm,
          replicationFactor: input.replication_factor ?? null,
        },
        ctx.topicDefaults,
      );
      check(validateTopicSettings(settings, topicSegmentSizeBytes(options.entries)));
      const streamId = pathIdentifier(request.params.stream_id);
      const id = createdId(await ctx.submit(request, {
        operation: Operation.createTopic,
        streamId,
        partitionsCount: input.partitions_count,
        ...settings,
        name: input.name,
        options: options.entries,
      }));
      return renderTopicDetails(createdView(queries.topic(streamId, idOf(id))));
    },
  );

  app.get(
    '/streams/:stream_id/topics/:topic_id',
    { schema: { params: TopicParams, response: responses({ 200: TopicDetails }) } },
    async (request) => {
      const streamId = pathIdentifier(request.params.stream_id);
      const topicId = pathIdentifier(request.params.topic_id);
      const ids = resolveTopicIds(queries, streamId, topicId);
      if (ids === null) throw notFound();
      if (!canReadTopic(ctx.identity(request).principal, ids.streamId, ids.topicId)) throw unauthorized();
      const topic = queries.topic(idOf(ids.streamId), idOf(ids.topicId));
      if (topic === null) throw notFound();
      return renderTopicDetails(topic);
    },
  );

  app.put(
    '/streams/:stream_id/topics/:topic_id',
    { schema: { params: TopicParams, body: UpdateTopicBody, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      const input = request.body;
      check(validateTopicName(input.name));
      await ctx.submit(request, {
        operation: Operation.updateTopic,
        streamId: pathIdentifier(request.params.stream_id),
        topicId: pathIdentifier(request.params.topic_id),
        name: input.name,
        ...updateSettings(input, ctx.topicDefaults),
      });
      return reply.code(204).send();
    },
  );

  app.delete(
    '/streams/:stream_id/topics/:topic_id',
    { schema: { params: TopicParams, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      await ctx.submit(request, { operation: Operation.deleteTopic, ...topicAddress(request.params) });
      return reply.code(204).send();
    },
  );

  app.delete(
    '/streams/:stream_id/topics/:topic_id/purge',
    { schema: { params: TopicParams, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      await ctx.submit(request, { operation: Operation.purgeTopic, ...topicAddress(request.params) });
      return reply.code(204).send();
    },
  );

  // ------------------------------------------------------------------- partitions, segments

  // Iggy answers 200 with an empty body here (not 204, not the topic).
  app.post(
    '/streams/:stream_id/topics/:topic_id/partitions',
    { schema: { params: TopicParams, body: PartitionsCountBody, response: responses({ 200: Empty }) } },
    async (request, reply) => {
      const partitionsCount = request.body.partitions_count;
      check(validatePartitionsChangeCount(partitionsCount));
      await ctx.submit(request, { operation: Operation.createPartitions, ...topicAddress(request.params), partitionsCount });
      return reply.code(200).send();
    },
  );

  app.delete(
    '/streams/:stream_id/topics/:topic_id/partitions',
    { schema: { params: TopicParams, querystring: PartitionsCountQuery, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      const partitionsCount = request.query.partitions_count;
      check(validatePartitionsChangeCount(partitionsCount));
      await ctx.submit(request, { operation: Operation.deletePartitions, ...topicAddress(request.params), partitionsCount });
      return reply.code(204).send();
    },
  );

  app.delete(
    '/streams/:stream_id/topics/:topic_id/partitions/:partition_id',
    { schema: { params: PartitionParams, querystring: SegmentsCountQuery, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      await ctx.submit(request, {
        operation: Operation.deleteSegments,
        ...topicAddress(request.params),
        partitionId: request.params.partition_id,
        segmentsCount: request.query.segments_count,
      });
      return reply.code(204).send();
    },
  );
};

function topicAddress(params: { stream_id: string; topic_id: string }): { streamId: Identifier; topicId: Identifier } {
  return { streamId: pathIdentifier(params.stream_id), topicId: pathIdentifier(params.topic_id) };
}
