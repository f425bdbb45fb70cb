import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import * as k8s from "@kubernetes/client-node";
import { AppError, isAppError } from "@/server/shared/errors";
import type { KubernetesDriverConfig } from "./kubernetes-config";

/**
 * The driver's connection to one cluster: a client-node KubeConfig (kubeconfig file or in-cluster service
 * account), the typed API clients, and the namespace every workspace object lives in. Built at boot, so a
 * missing file or context fails there with a message naming it.
 */
export class KubeClient {
  readonly kc: k8s.KubeConfig;
  readonly core: k8s.CoreV1Api;
  readonly networking: k8s.NetworkingV1Api;
  /** Aggregated APIs without typed clients (metrics.k8s.io). */
  readonly custom: k8s.CustomObjectsApi;
  readonly namespace: string;
  /** Where the cluster is, for messages (never credentials). */
  readonly server: string;

  constructor(config: KubernetesDriverConfig) {
    const { kc, namespace } = loadKubeConfig(config);
    this.kc = kc;
    this.namespace = config.namespace ?? namespace ?? "default";
    this.server = kc.getCurrentCluster()?.server ?? "(no cluster)";
    this.core = kc.makeApiClient(k8s.CoreV1Api);
    this.networking = kc.makeApiClient(k8s.NetworkingV1Api);
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
  }

  /** Runs an API call, mapping its failure to an AppError (404 → NOT_FOUND, 409 → CONFLICT, ...). */
  async call<T>(what: string, operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      throw kubeError(error, what, this.server);
    }
  }

  /** The object, or null when the API server answers 404. */
  async readOrNull<T>(what: string, operation: () => Promise<T>): Promise<T | null> {
    try {
      return await operation();
    } catch (error) {
      if (statusOf(error) === 404) return null;
      throw kubeError(error, what, this.server);
    }
  }

  /** Deletes, treating 404 (already gone) as success. Returns false when there was nothing to delete. */
  async deleteIfPresent(what: string, operation: () => Promise<unknown>): Promise<boolean> {
    try {
      await operation();
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw kubeError(error, what, this.server);
    }
  }
}

function loadKubeConfig(config: KubernetesDriverConfig): {
  kc: k8s.KubeConfig;
  namespace: string | undefined;
} {
  const kc = new k8s.KubeConfig();
  const { connection } = config;
  if (connection.source === "kubeconfig") {
    try {
      kc.loadFromFile(connection.path);
    } catch (error) {
      throw bootError(`cannot load the kubeconfig ${connection.path}: ${messageOf(error)}`, error);
    }
    if (connection.context) {
      if (!kc.getContextObject(connection.context)) {
        throw bootError(`the kubeconfig ${connection.path} has no context "${connection.context}"`);
      }
      kc.setCurrentContext(connection.context);
    }
    if (!kc.getCurrentCluster()) {
      throw bootError(
        `the kubeconfig ${connection.path} has no current context with a cluster (set BERTH_K8S_CONTEXT)`,
      );
    }
    return { kc, namespace: kc.getContextObject(kc.getCurrentContext())?.namespace };
  }
  // The service account folder is a runtime setting (a Pod mount), never a file of the build: the
  // turbopackIgnore comments keep `next build` from tracing the whole project into the server output.
  const dir = connection.serviceAccountDir;
  const tokenFile = path.join(dir, "token");
  const caFile = path.join(dir, "ca.crt");
  for (const file of [tokenFile, caFile]) {
    if (!fs.existsSync(/* turbopackIgnore: true */ file)) {
      throw bootError(
        `in-cluster configuration needs ${file} (the Pod's service account token is not mounted)`,
      );
    }
  }
  const host = net.isIPv6(connection.host) ? `[${connection.host}]` : connection.host;
  const namespaceFile = path.join(dir, "namespace");
  const namespace = fs.existsSync(/* turbopackIgnore: true */ namespaceFile)
    ? fs.readFileSync(/* turbopackIgnore: true */ namespaceFile, "utf8").trim()
    : undefined;
  kc.loadFromOptions({
    clusters: [
      { name: "in-cluster", server: `https://${host}:${connection.port}`, caFile, skipTLSVerify: false },
    ],
    // The tokenFile provider re-reads the file: projected service account tokens are rotated by the kubelet.
    users: [{ name: "in-cluster", authProvider: { name: "tokenFile", config: { tokenFile } } }],
    contexts: [
      { name: "in-cluster", cluster: "in-cluster", user: "in-cluster", ...(namespace ? { namespace } : {}) },
    ],
    currentContext: "in-cluster",
  });
  return { kc, namespace };
}

function bootError(message: string, cause?: unknown): AppError {
  return new AppError("INTERNAL", `Kubernetes workspace driver: ${message}`, {
    cause,
    userMessage: "Server misconfigured",
  });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The HTTP status of a client-node ApiException (undefined for transport failures). */
function statusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}

/** The `metav1.Status` reason and message the API server answered, when it did. */
function statusBodyOf(error: unknown): { reason?: string; message?: string } {
  const body = (error as { body?: unknown } | null)?.body;
  if (typeof body !== "string") return {};
  try {
    const parsed = JSON.parse(body) as { reason?: unknown; message?: unknown };
    return {
      reason: typeof parsed.reason === "string" ? parsed.reason : undefined,
      message: typeof parsed.message === "string" ? parsed.message : undefined,
    };
  } catch {
    return {};
  }
}

/** An AppError for a failed API call: the Status reason and message when there is one, the code mapped. */
function kubeError(error: unknown, what: string, server: string): AppError {
  if (isAppError(error)) return error;
  const status = statusOf(error);
  const body = statusBodyOf(error);
  const detail = body.message ?? messageOf(error).split("\n")[0] ?? "";
  const details = { statusCode: status, reason: body.reason };
  if (status === undefined) {
    return new AppError("UNAVAILABLE", `Kubernetes API server ${server} unreachable (${what}): ${detail}`, {
      cause: error,
      userMessage: "The Kubernetes cluster is not reachable",
    });
  }
  const code =
    status === 401
      ? "UNAUTHORIZED"
      : status === 403
        ? "FORBIDDEN"
        : status === 404
          ? "NOT_FOUND"
          : status === 409
            ? "CONFLICT"
            : status === 400 || status === 422
              ? "UNPROCESSABLE"
              : status === 429
                ? "TOO_MANY_REQUESTS"
                : "UNAVAILABLE";
  const hint = status === 401 || status === 403 ? " (check the credentials and the Role bound to Berth)" : "";
  return new AppError(code, `Kubernetes refused to ${what}: HTTP ${status} ${detail}${hint}`, {
    cause: error,
    details,
    userMessage: `The Kubernetes cluster refused to ${what}`,
  });
}
