// The kernels module's export list. Numbers-only ABI: pointers and lengths in, results written
// to caller-provided memory or returned as integers. JavaScript owns all memory above heap_base().
export function heap_base(): usize {
  return __heap_base;
}
export { trailer_write, trailer_split } from './trailer';
export { journal_scan } from './journal';
export { xxh3_64 } from './xxh3';
export { chunk_manifest } from './chunks';
export { snapshot_encode, snapshot_encoded_size_max } from './msgpack';
export { xxh3_stream_state_size, xxh3_stream_init, xxh3_stream_update, xxh3_stream_digest } from './xxh3-stream';
export { message_batch_verify, message_batch_checksum, message_batch_slice } from './message-batch';
