/**
 * Read-side views (metadata/queries.ts, camelCase, units in names) rendered as Iggy's snake_case
 * JSON objects. Pure functions of the view: handlers call them and return the result, and the
 * route's response schema serializes it.
 */
import type {
  ConsumerGroupDetailsView,
  ConsumerGroupView,
  PartitionView,
  PersonalAccessTokenView,
  StreamDetailsView,
  StreamView,
  TopicDetailsView,
  TopicView,
  UserDetailsView,
  UserView,
} from '../metadata/queries.js';
import { parseCompression, resolveTopicOptions } from '../metadata/options.js';
import { CompressionAlgorithm, UserStatus } from '../format/snapshot-model.js';
import type { ClientSessionInfo, ClusterNode, ClusterStatus } from './node-api.js';
import { permissionsToJson } from './permissions-json.js';
import type {
  ClientInfoDetailsJson,
  ClientInfoJson,
  ClusterMetadataJson,
  ClusterStatusJson,
  ConsumerGroupDetailsJson,
  ConsumerGroupJson,
  PartitionJson,
  PersonalAccessTokenInfoJson,
  StreamDetailsJson,
  StreamJson,
  TopicDetailsJson,
  TopicJson,
  UserInfoDetailsJson,
  UserInfoJson,
} from './schemas.js';

/** Streams and users have no catalog keys (metadata/options.ts): their option map is empty. */
const NO_OPTIONS = Object.freeze({});

/** Every topic catalog key with its effective value and provenance, keys ascending (Iggy's BTreeMap). */
export function renderTopicOptions(view: TopicView): Record<string, { value: string; explicit: boolean }> {
  const out: Record<string, { value: string; explicit: boolean }> = {};
  for (const option of resolveTopicOptions(view, view.options)) out[option.key] = { value: option.value, explicit: option.explicit };
  return out;
}

const DECIMAL_UNITS = ['B', 'KB', 'MB', 'GB', 'TB', 'PB', 'EB'] as const;
const BINARY_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'] as const;

/**
 * A byte count as Iggy's display text ("0 B", "1 KiB", "1500 B"): the largest decimal or binary
 * unit that divides the count exactly, so the text converts back to the same count. Display text
 * only (iggy-http-api-and-ops.md §1.1), never parsed by us.
 */
export function formatBytes(bytes: number): string {
  if (!Number.isSafeInteger(bytes) || bytes <= 0) return '0 B';
  let best = `${bytes} B`;
  let bestValue = bytes;
  for (const [base, units] of [
    [1000, DECIMAL_UNITS],
    [1024, BINARY_UNITS],
  ] as const) {
    let value = bytes;
    for (let index = 1; index < units.length && value % base === 0; index++) {
      value /= base;
      if (value < bestValue) {
        bestValue = value;
        best = `${value} ${units[index]}`;
      }
    }
  }
  return best;
}

export function compressionName(code: number): 'none' | 'gzip' {
  return code === CompressionAlgorithm.gzip ? 'gzip' : 'none';
}

/** Iggy's `CompressionAlgorithm::from_str` is case-insensitive; null for an unknown name. */
export function compressionCode(name: string): number | null {
  return parseCompression(name);
}

export function userStatusName(status: number): 'active' | 'inactive' {
  return status === UserStatus.inactive ? 'inactive' : 'active';
}

export function userStatusCode(name: 'active' | 'inactive'): UserStatus {
  return name === 'inactive' ? UserStatus.inactive : UserStatus.active;
}

export function renderStream(view: StreamView): StreamJson {
  return {
    id: view.id,
    created_at: view.createdAtUs,
    name: view.name,
    size: formatBytes(view.sizeBytes),
    messages_count: view.messagesCount,
    topics_count: view.topicsCount,
    options: NO_OPTIONS,
  };
}

export function renderStreamDetails(view: StreamDetailsView): StreamDetailsJson {
  return { ...renderStream(view), topics: view.topics.map(renderTopic) };
}

export function renderTopic(view: TopicView): TopicJson {
  return {
    id: view.id,
    created_at: view.createdAtUs,
    name: view.name,
    size: formatBytes(view.sizeBytes),
    message_expiry: view.messageExpiryUs,
    compression_algorithm: compressionName(view.compressionAlgorithm),
    max_topic_size: view.maxTopicSizeBytes,
    messages_count: view.messagesCount,
    partitions_count: view.partitionsCount,
    options: renderTopicOptions(view),
  };
}

export function renderPartition(view: PartitionView): PartitionJson {
  return {
    id: view.id,
    created_at: view.createdAtUs,
    segments_count: view.segmentsCount,
    current_offset: view.currentOffset,
    size: formatBytes(view.sizeBytes),
    messages_count: view.messagesCount,
  };
}

export function renderTopicDetails(view: TopicDetailsView): TopicDetailsJson {
  return { ...renderTopic(view), partitions: view.partitions.map(renderPartition) };
}

export function renderConsumerGroup(view: ConsumerGroupView): ConsumerGroupJson {
  return { id: view.id, name: view.name, partitions_count: view.partitionsCount, members_count: view.membersCount };
}

export function renderConsumerGroupDetails(view: ConsumerGroupDetailsView): ConsumerGroupDetailsJson {
  return {
    ...renderConsumerGroup(view),
    members: view.members.map((member) => ({
      id: member.id,
      partitions_count: member.partitionsCount,
      partitions: member.partitions.slice(),
    })),
  };
}

export function renderUser(view: UserView): UserInfoJson {
  return {
    id: view.id,
    created_at: view.createdAtUs,
    status: userStatusName(view.status),
    username: view.username,
    options: NO_OPTIONS,
  };
}

export function renderUserDetails(view: UserDetailsView): UserInfoDetailsJson {
  return { ...renderUser(view), permissions: permissionsToJson(view.permissions) };
}

export function renderPersonalAccessToken(view: PersonalAccessTokenView): PersonalAccessTokenInfoJson {
  return { name: view.name, expiry_at: view.expiryAtUs };
}

/** `host:port` -> [host, port]; a bracketed IPv6 host keeps its address without brackets. */
function splitHostPort(address: string): [string, number] {
  const colon = address.lastIndexOf(':');
  if (colon < 0) return [address, 0];
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const port = Number(address.slice(colon + 1));
  return [host, Number.isInteger(port) && port >= 0 && port <= 0xffff ? port : 0];
}

/** vrmeta serves HTTP only: the other transports' ports are 0 ("not served"). */
export function renderClusterMetadata(name: string, nodes: readonly ClusterNode[]): ClusterMetadataJson {
  return {
    name,
    nodes: nodes.map((node) => {
      const [ip, http] = splitHostPort(node.http);
      return { name: node.name, ip, endpoints: { tcp: node.tcpPort ?? 0, quic: 0, http, websocket: 0 }, role: node.role, status: node.status };
    }),
  };
}

export function renderClient(client: ClientSessionInfo): ClientInfoJson {
  return {
    client_id: client.clientId,
    user_id: client.userId,
    address: client.address ?? '',
    transport: client.transport ?? 'TCP',
    consumer_groups_count: client.consumerGroups.length,
  };
}

export function renderClientDetails(client: ClientSessionInfo): ClientInfoDetailsJson {
  return {
    ...renderClient(client),
    consumer_groups: client.consumerGroups.map((group) => ({
      stream_id: group.streamId,
      topic_id: group.topicId,
      group_id: group.groupId,
    })),
  };
}

export function renderClusterStatus(status: ClusterStatus): ClusterStatusJson {
  const transfer = status.stateTransfer;
  return {
    replica: status.replica,
    replica_count: status.replicaCount,
    view: status.view,
    status: status.status,
    primary: status.primary,
    op: status.op,
    commit_min: status.commitMin,
    commit_max: status.commitMax,
    checkpoint_op: status.checkpointOp,
    checkpoint_id: status.checkpointId,
    heartbeat_ms: status.heartbeatMs,
    election_timeout_ms: status.electionTimeoutMs,
    state_transfer:
      transfer === null
        ? null
        : {
            stage: transfer.stage,
            peer: transfer.peer,
            artifact: transfer.artifact,
            bytes_done: transfer.bytesDone,
            bytes_total: transfer.bytesTotal,
            started_at_ms: transfer.startedAtMs,
            eta_ms: transfer.etaMs,
          },
    replicas: status.replicas.map((peer) => ({
      replica: peer.replica,
      address: peer.address,
      connected: peer.connected,
      commit_max: peer.commitMax,
      lag_ops: peer.lagOps,
    })),
  };
}
