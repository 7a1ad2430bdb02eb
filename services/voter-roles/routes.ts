import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import {
  ClearVoterRoleSettingsResponseSchema,
  GetVoterRoleSettingsResponseSchema,
  SetVoterRoleSettingsResponseSchema,
  VoterRoleService,
} from "../../gen/proto/servers/v1/voter_roles_pb.js";
import type { CoreDeps } from "../shared/adapters/deps.js";
import { clearVoterRoleSettings, getVoterRoleSettings, setVoterRoleSettings } from "./manage-voter-roles.js";

/** Registers VoterRoleService (Set, Get and ClearVoterRoleSettings) on a Connect router. */
export function voterRoleRoutes(deps: CoreDeps): (router: ConnectRouter) => void {
  return (router) => {
    router.service(VoterRoleService, {
      setVoterRoleSettings: async (req) => create(SetVoterRoleSettingsResponseSchema, { settings: await setVoterRoleSettings(deps, req) }),
      getVoterRoleSettings: async (req) => create(GetVoterRoleSettingsResponseSchema, { settings: await getVoterRoleSettings(deps, req) }),
      clearVoterRoleSettings: async (req) => {
        await clearVoterRoleSettings(deps, req);
        return create(ClearVoterRoleSettingsResponseSchema, {});
      },
    });
  };
}
