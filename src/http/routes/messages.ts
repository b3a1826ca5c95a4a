/**
 * The message data plane over HTTP (Iggy's `/streams/{s}/topics/{t}/messages` and
 * `/consumer-offsets` routes): served by whichever node is hit, never forwarded to the metadata
 * primary. A send answers 201 with its confirmation once a quorum holds the batch durably
 * (`iggy-durability: replicated`); a poll answers from this node's committed state. The JSON
 * shapes are src/partition/http-messages.ts's.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode } from '../../metadata/errors.js';
import type { Identifier } from '../../metadata/operations.js';
import { DataError } from '../../partition/codes.js';
import type { OffsetAddress } from '../../partition/consumer.js';
import {
  decodeHttpPollQuery,
  decodeHttpSendMessages,
  encodeHttpPolledMessages,
  type HttpQuery,
  type HttpRefusal,
} from '../../partition/http-messages.js';
import type { HttpContext } from '../context.js';
import { httpError, iggyError, invalidRequest, notFound, unprocessableBody } from '../errors.js';
import { stringifyJsonLossless } from '../json.js';
import type { DataPlaneApi, DataPlaneCaller } from '../node-api.js';
import { pathIdentifier } from '../requests.js';
import { TopicParams } from '../schemas.js';
import { Type } from 'typebox';

/** What a send's 201 says about durability: on disk on a quorum of replicas. */
export const DURABILITY_HEADER = 'iggy-durability';
export const DURABILITY_REPLICATED = 'replicated';

function refusal(refused: HttpRefusal, where: 'body' | 'query'): Error {
  if (refused.stage === 'validate') return iggyError(refused.code, refused.reason);
  return where === 'body' ? unprocessableBody(refused.field, refused.reason) : invalidRequest(refused.field, refused.reason);
}

function mintId(): bigint {
  const bytes = randomBytes(16);
  // A UUIDv4, as Iggy mints for a message sent with id 0.
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  return BigInt(`0x${bytes.toString('hex')}`);
}

function sendJson(reply: FastifyReply, status: number, value: unknown): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(stringifyJsonLossless(value));
}

/** A query parameter's single value (a repeated one is refused). */
function queryText(query: HttpQuery, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw invalidRequest(name, 'given more than once');
  return value;
}

function partitionIdOf(value: unknown, field: string): number | null {
  if (value === undefined || value === null || value === '') return null;
  const number = typeof value === 'bigint' ? Number(value) : typeof value === 'string' ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isInteger(number) || number < 0 || number > 0xffff_ffff) {
    throw invalidRequest(field, 'must be a u32');
  }
  return number;
}

export const messageRoutes: FastifyPluginAsyncTypebox<{ ctx: HttpContext }> = async (app, { ctx }) => {
  const plane = (): DataPlaneApi => {
    const dataPlane = ctx.node.dataPlane;
    if (dataPlane === undefined) throw iggyError(ErrorCode.featureUnavailable);
    return dataPlane;
  };
  const callerOf = (request: FastifyRequest): DataPlaneCaller => {
    const identity = ctx.identity(request);
    return { userId: identity.userId, principal: identity.principal };
  };
  const address = (params: { stream_id: string; topic_id: string }, consumer: Identifier, partitionId: number | null): OffsetAddress => ({
    consumer: { kind: 'consumer', id: consumer },
    streamId: pathIdentifier(params.stream_id),
    topicId: pathIdentifier(params.topic_id),
    partitionId,
  });

  app.post('/streams/:stream_id/topics/:topic_id/messages', { schema: { params: TopicParams } }, async (request, reply) => {
    const decoded = decodeHttpSendMessages(request.body, plane().kernels, { originTimestampUs: Math.floor(ctx.nowMs() * 1000), mintId });
    if (!decoded.ok) throw refusal(decoded, 'body');
    const { partitioning, batch } = decoded.value;
    const streamId = pathIdentifier(request.params.stream_id);
    const topicId = pathIdentifier(request.params.topic_id);
    const sent = await plane().send(callerOf(request), { streamId, topicId, partitioning, batch });
    if (typeof sent === 'number') throw iggyError(sent);
    reply.header(DURABILITY_HEADER, DURABILITY_REPLICATED);
    const confirmation = { stream_id: sent.streamId, topic_id: sent.topicId, partition_id: sent.partitionId, base_offset: sent.baseOffset };
    return sendJson(reply, 201, { confirmations: [confirmation] });
  });

  app.get('/streams/:stream_id/topics/:topic_id/messages', { schema: { params: TopicParams } }, async (request, reply) => {
    const query = decodeHttpPollQuery(request.query as HttpQuery);
    if (!query.ok) throw refusal(query, 'query');
    const streamId = pathIdentifier(request.params.stream_id);
    const topicId = pathIdentifier(request.params.topic_id);
    const polled = await plane().poll(callerOf(request), { ...query.value, streamId, topicId });
    if (typeof polled === 'number') throw iggyError(polled);
    return sendJson(reply, 200, encodeHttpPolledMessages(polled));
  });

  app.get('/streams/:stream_id/topics/:topic_id/consumer-offsets', { schema: { params: TopicParams } }, async (request, reply) => {
    const query = request.query as HttpQuery;
    const consumer = queryText(query, 'consumer_id');
    if (consumer === undefined) throw invalidRequest('consumer_id', 'required');
    const found = plane().offset(callerOf(request), address(request.params, pathIdentifier(consumer), partitionIdOf(queryText(query, 'partition_id'), 'partition_id')));
    if (found === null) throw notFound();
    if (typeof found === 'number') throw iggyError(found);
    return sendJson(reply, 200, { partition_id: found.partitionId, current_offset: found.currentOffset, stored_offset: found.storedOffset });
  });

  app.put(
    '/streams/:stream_id/topics/:topic_id/consumer-offsets',
    { schema: { params: TopicParams, body: Type.Object({}, { additionalProperties: true }) } },
    async (request, reply) => {
      const body = request.body as Record<string, unknown>;
      const consumer = body['consumer_id'];
      const consumerId = typeof consumer === 'string' ? pathIdentifier(consumer) : typeof consumer === 'number' || typeof consumer === 'bigint' ? pathIdentifier(String(consumer)) : null;
      if (consumerId === null) throw unprocessableBody('consumer_id', 'a numeric or string identifier is required');
      const offset = body['offset'];
      if ((typeof offset !== 'number' && typeof offset !== 'bigint') || (typeof offset === 'number' && !Number.isSafeInteger(offset)) || BigInt(offset) < 0n) {
        throw unprocessableBody('offset', 'must be a u64');
      }
      const code = await plane().storeOffset(callerOf(request), address(request.params, consumerId, partitionIdOf(body['partition_id'], 'partition_id')), BigInt(offset));
      if (code !== 0) throw iggyError(code);
      return reply.code(204).send();
    },
  );

  app.delete('/streams/:stream_id/topics/:topic_id/consumer-offsets/:consumer_id', async (request, reply) => {
    const params = request.params as { stream_id: string; topic_id: string; consumer_id: string };
    const partitionId = partitionIdOf(queryText(request.query as HttpQuery, 'partition_id'), 'partition_id');
    const code = await plane().deleteOffset(callerOf(request), address(params, pathIdentifier(params.consumer_id), partitionId));
    if (code === DataError.consumerOffsetNotFound) throw httpError(404, 'not_found', 'no offset is stored for this consumer');
    if (code !== 0) throw iggyError(code);
    return reply.code(204).send();
  });
};
