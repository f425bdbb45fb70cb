-- The provision claim (server/modules/machines/provision-claim.data.ts): the one run creating a PROVISIONING
-- workspace's machine, so a second provision job (Redis lost the first one's job while it ran) waits for it.
-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "provision_held_until" TIMESTAMP(3),
ADD COLUMN     "provision_holder" TEXT;
