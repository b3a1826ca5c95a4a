/**
 * Consumer groups (Iggy's `/streams/{s}/topics/{t}/consumer-groups` routes), in the control-plane
 * scope. Every group operation needs read access to the topic (permissions.ts); as in Iggy, the
 * topic is resolved first, so a missing stream or topic is a 404 whatever the caller may read.
 * Joining and leaving are binary-protocol operations (per client session) and have no route.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { idOf, Operation } from '../../metadata/operations.js';
import { canReadTopic } from '../../metadata/permissions.js';
import { validateConsumerGroupName } from '../../metadata/validation.js';
import type { HttpContext } from '../context.js';
import { notFound, unauthorized } from '../errors.js';
import { renderConsumerGroup, renderConsumerGroupDetails } from '../render.js';
import { check, createdId, createdView, pathIdentifier } from '../requests.js';
import {
  ConsumerGroup,
  ConsumerGroupDetails,
  CreateConsumerGroupBody,
  Empty,
  GroupParams,
  TopicParams,
  responses,
} from '../schemas.js';
import { resolveTopicIds, type TopicIds } from './resolve.js';

export const consumerGroupRoutes: FastifyPluginAsyncTypebox<{ ctx: HttpContext }> = async (app, { ctx }) => {
  const { queries } = ctx.node.state;

  /** The topic's ids if it exists and the caller may read it; 404 / 403 otherwise. */
  function readableTopic(request: FastifyRequest, streamText: string, topicText: string): TopicIds {
    const ids = resolveTopicIds(queries, pathIdentifier(streamText), pathIdentifier(topicText));
    if (ids === null) throw notFound();
    if (!canReadTopic(ctx.identity(request).principal, ids.streamId, ids.topicId)) throw unauthorized();
    return ids;
  }

  app.get(
    '/streams/:stream_id/topics/:topic_id/consumer-groups',
    { schema: { params: TopicParams, response: responses({ 200: Type.Array(ConsumerGroup) }) } },
    async (request) => {
      const ids = readableTopic(request, request.params.stream_id, request.params.topic_id);
      const groups = queries.consumerGroups(idOf(ids.streamId), idOf(ids.topicId));
      if (groups === null) throw notFound();
      return groups.map(renderConsumerGroup);
    },
  );

  app.get(
    '/streams/:stream_id/topics/:topic_id/consumer-groups/:group_id',
    { schema: { params: GroupParams, response: responses({ 200: ConsumerGroupDetails }) } },
    async (request) => {
      const ids = readableTopic(request, request.params.stream_id, request.params.topic_id);
      const group = queries.consumerGroup(idOf(ids.streamId), idOf(ids.topicId), pathIdentifier(request.params.group_id));
      if (group === null) throw notFound();
      return renderConsumerGroupDetails(group);
    },
  );

  app.post(
    '/streams/:stream_id/topics/:topic_id/consumer-groups',
    { schema: { params: TopicParams, body: CreateConsumerGroupBody, response: responses({ 200: ConsumerGroupDetails }) } },
    async (request) => {
      const { name } = request.body;
      check(validateConsumerGroupName(name));
      const streamId = pathIdentifier(request.params.stream_id);
      const topicId = pathIdentifier(request.params.topic_id);
      const id = createdId(await ctx.submit(request, { operation: Operation.createConsumerGroup, streamId, topicId, name }));
      return renderConsumerGroupDetails(createdView(queries.consumerGroup(streamId, topicId, idOf(id))));
    },
  );

  app.delete(
    '/streams/:stream_id/topics/:topic_id/consumer-groups/:group_id',
    { schema: { params: GroupParams, response: responses({ 204: Empty }) } },
    async (request, reply) => {
      await ctx.submit(request, {
        operation: Operation.deleteConsumerGroup,
        streamId: pathIdentifier(request.params.stream_id),
        topicId: pathIdentifier(request.params.topic_id),
        groupId: pathIdentifier(request.params.group_id),
      });
      return reply.code(204).send();
    },
  );
};
