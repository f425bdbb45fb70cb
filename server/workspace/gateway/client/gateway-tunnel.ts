import http from "node:http";
import type { Duplex } from "node:stream";
import { AppError, isAppError } from "@/server/shared/errors";
import {
  GATEWAY_TUNNEL_PROTOCOL,
  PORT_NOT_LISTENING,
  TUNNEL_PROTOCOL,
  tunnelPath,
  type TGatewayHealth,
} from "../gateway-protocol";
import { gatewayError } from "./gateway-client";
import type { GatewayEndpoint } from "./gateway-wire";

/** `details.reason` of the error for a gateway older than the tunnel (protocol < 4). */
const GATEWAY_PREDATES_PREVIEWS = "gateway_predates_previews";

/**
 * The refusal for a gateway that cannot tunnel: it was started by a Berth from before previews and keeps
 * running until the workspace restarts (its machine, hence its gateway, is re-made by a provision).
 */
function gatewayPredatesPreviews(protocol: number): AppError {
  return new AppError(
    "UNPROCESSABLE",
    `the workspace's gateway speaks protocol ${protocol}, tunnels need ${GATEWAY_TUNNEL_PROTOCOL}`,
    {
      userMessage:
        "This workspace's gateway predates previews; restart the workspace (stop, then start) to use them.",
      details: { reason: GATEWAY_PREDATES_PREVIEWS, protocol },
    },
  );
}

/**
 * A raw TCP connection to 127.0.0.1:`port` inside the machine, through its gateway (the tunnel upgrade of
 * gateway-protocol.ts). `health` is the gateway's health answer: an older gateway is refused here, before any
 * request, since its 404 for the unknown upgrade would read like a missing port. Resolves once the gateway
 * connected and switched protocols; rejects with the gateway's typed error otherwise (BAD_GATEWAY
 * `port_not_listening` when nothing listens, with a message that says so).
 */
export async function openGatewayTunnel(
  endpoint: GatewayEndpoint,
  token: string,
  port: number,
  options: { health: Promise<TGatewayHealth>; timeoutMs?: number },
): Promise<Duplex> {
  const health = await options.health;
  if (health.protocol < GATEWAY_TUNNEL_PROTOCOL) throw gatewayPredatesPreviews(health.protocol);
  const timeoutMs = options.timeoutMs ?? 15_000;
  return new Promise<Duplex>((resolve, reject) => {
    const req = http.request({
      ...endpoint,
      method: "GET",
      path: tunnelPath(port),
      headers: { authorization: `Bearer ${token}`, connection: "Upgrade", upgrade: TUNNEL_PROTOCOL },
      agent: false,
    });
    const timer = setTimeout(
      () =>
        req.destroy(
          new AppError("TIMEOUT", `gateway tunnel to port ${port} timed out`, {
            userMessage: `Port ${port} inside the workspace did not answer.`,
            details: { port, timeoutMs },
          }),
        ),
      timeoutMs,
    );
    req.on("upgrade", (_res, socket, head) => {
      clearTimeout(timer);
      // Bytes the app sent right after the switch arrived with it: put them back in front.
      if (head.length > 0) socket.unshift(head);
      resolve(socket);
    });
    req.on("response", (res) => {
      clearTimeout(timer);
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () =>
        reject(tunnelRefused(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8"), port)),
      );
      res.on("error", () => reject(tunnelRefused(res.statusCode ?? 0, "", port)));
    });
    req.on("error", (error) => {
      clearTimeout(timer);
      reject(
        isAppError(error)
          ? error
          : new AppError("UNAVAILABLE", `gateway tunnel failed: ${error.message}`, {
              cause: error,
              userMessage: "The workspace's gateway is not reachable.",
              details: { errno: (error as NodeJS.ErrnoException).code },
            }),
      );
    });
    req.end();
  });
}

function tunnelRefused(status: number, text: string, port: number): AppError {
  const error = gatewayError(status, text);
  const notListening = error.details?.reason === PORT_NOT_LISTENING;
  return new AppError(error.code, error.message, {
    userMessage: notListening
      ? `Nothing is listening on port ${port} inside the workspace.`
      : error.code === "BAD_REQUEST"
        ? `Port ${port} cannot be previewed.`
        : error.userMessage,
    details: { ...error.details, port },
  });
}
