/** Reported as `iggy_server_version` unless the node layer passes the package version. */
export const SERVER_VERSION_DEFAULT = '0.1.0';
