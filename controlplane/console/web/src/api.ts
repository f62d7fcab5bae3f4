// api.ts: the Connect clients of the control plane (same origin, the session cookie goes with
// every call) and how an API error is told to a person (the ErrorInfo message).
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { create } from "@bufbuild/protobuf";
import { RunService } from "../../../../clients/ts/gen/rbook/v1/run_service_pb.js";
import { ApprovalService } from "../../../../clients/ts/gen/rbook/v1/approval_service_pb.js";
import { IdentityService, WhoAmIResponseSchema } from "../../../../clients/ts/gen/rbook/v1/identity_service_pb.js";
import type { WhoAmIResponse } from "../../../../clients/ts/gen/rbook/v1/identity_service_pb.js";
import { ErrorInfoSchema } from "../../../../clients/ts/gen/rbook/v1/errors_pb.js";

const transport = createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true });

/** runs is RunService. */
export const runs = createClient(RunService, transport);
/** approvals is ApprovalService. */
export const approvals = createClient(ApprovalService, transport);
/** identity is IdentityService. */
export const identity = createClient(IdentityService, transport);

/** errorCode returns the ErrorInfo code of an API error ("E_SELF_APPROVAL"), or "". */
export function errorCode(err: unknown): string {
  if (err instanceof ConnectError) {
    const info = err.findDetails(ErrorInfoSchema)[0];
    if (info) return info.code;
  }
  return "";
}

/** isAborted tells whether err is the cancellation of a call this page gave up. */
export function isAborted(err: unknown): boolean {
  return (err instanceof ConnectError && err.code === Code.Canceled) || (err instanceof DOMException && err.name === "AbortError");
}

/** isUnavailable tells whether a stream ended because the server went away or restarts. */
export function isUnavailable(err: unknown): boolean {
  return err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.Unknown || err.code === Code.Aborted);
}

/** errorText is what a person is told about err: the server's ErrorInfo message, and what to do. */
export function errorText(err: unknown): string {
  if (err instanceof ConnectError) {
    const info = err.findDetails(ErrorInfoSchema)[0];
    let msg = info?.message || err.rawMessage || err.message;
    msg = msg.replace(/^E_[A-Z_]+: /, "");
    if (err.code === Code.Unauthenticated) {
      return /session ended/.test(msg) ? `${msg}.`.replace(/\.\.$/, ".") + " Sign in to continue." : "You are not signed in. Sign in to continue.";
    }
    if (err.code === Code.PermissionDenied && !msg) return "You are not allowed to do this.";
    if (err.code === Code.Unavailable) return "The control plane cannot be reached; it may be restarting. The page retries.";
    return msg;
  }
  if (err instanceof Error) return err.message;
  return String(err);
}

/** Who is the WhoAmI answer, or an anonymous one when the server has no IdentityService. */
export type Who = WhoAmIResponse & { known: boolean };

let who: Promise<Who> | null = null;

/** whoAmI returns the caller (cached until refreshWho). */
export function whoAmI(): Promise<Who> {
  if (!who) {
    who = identity.whoAmI({}).then(
      (r) => Object.assign(r, { known: true }),
      (err) => {
        if (err instanceof ConnectError && (err.code === Code.Unimplemented || err.code === Code.NotFound)) {
          return Object.assign(create(WhoAmIResponseSchema, {}), { known: false });
        }
        who = null;
        throw err;
      },
    );
  }
  return who;
}

/** refreshWho forgets the cached WhoAmI answer (after sign-in and sign-out). */
export function refreshWho(): void {
  who = null;
}

/** isApprover tells whether the caller has the approver role (admin includes it). */
export function isApprover(w: Who): boolean {
  if (!w.known) return true; // the server decides; an older server has no WhoAmI
  return w.roles.includes("approver") || w.roles.includes("admin");
}
