/**
 * What the host's egress proxy (server/workspace/egress/) and the in-sandbox forwarder
 * (gateway/server/egress-forwarder.ts) agree on. The forwarder runs from the gateway bundle with
 * BERTH_GATEWAY_ROLE=egress in FRONT of one command, in that command's sandbox or container.
 */
export const EGRESS_ENV = {
  /** The value of BERTH_GATEWAY_ROLE that makes the bundle the forwarder. */
  role: "egress",
  /** The proxy's unix socket, as the command's machine sees it. */
  socket: "BERTH_EGRESS_SOCKET",
  /** The command's grant at the proxy (not a secret value: it only names a policy in the host's memory). */
  token: "BERTH_EGRESS_TOKEN",
} as const;

/** The user name of the proxy URL's credentials (`http://berth:<token>@127.0.0.1:<port>`). */
export const EGRESS_PROXY_USER = "berth";
