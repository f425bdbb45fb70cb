/**
 * Accessors of the process' Berth (server/composition/berth.ts) for code that is entered from outside the
 * root and is not handed it yet. Each one reads the one process-global handle; none builds anything.
 */
import type { WorkspaceEngine } from "@/server/engine/engine";
import type { AgentServices } from "@/server/modules/chat/chat.composition";
import type { ChangeFeed } from "@/server/modules/live/change-feed";
import type { BackendSettingsService } from "@/server/modules/backend-settings/backend-settings.service";
import type { WebhookService } from "@/server/modules/webhook/webhook.service";
import type { WorkspaceServices } from "./berth";
import { processBerth } from "./process-berth";

export function getEngine(): WorkspaceEngine {
  return processBerth().engine;
}

export function getChangeFeed(): ChangeFeed {
  return processBerth().changeFeed;
}

export function getWorkspaceServices(): WorkspaceServices {
  return processBerth().workspaces;
}

export function getAgentServices(): AgentServices {
  return processBerth().agents;
}

export function getBackendSettingsService(): BackendSettingsService {
  return processBerth().backendSettings;
}

export function getWebhookService(): WebhookService {
  return processBerth().webhooks;
}
