/** The errors an operator sees are named by what to do about them, on the paths that raise them. */
import { describe, expect, it } from "vitest";
import { ConfigurationError, DependencyError, HadisError, ModelExportError, OperatorError } from "../../contracts/errors.ts";
import { subjects } from "../../contracts/subjects.ts";
import { createScheduler } from "../../actors/diffusion/scheduler.ts";
import { natsUrls, natsTlsFromEnv } from "../../services/cli/credentials.ts";
import { createPolicy, staticConfigFor } from "../../services/resource-manager/policies.ts";
import { loadProfiles } from "../../services/files/profiles.ts";

/** What `run` throws (fails the test when it returns). */
function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (err) {
    return err;
  }
  throw new HadisError("internal", "expected a throw");
}

describe("operator-facing errors", () => {
  it("carry their name, message, setting and cause, and are OperatorErrors, not wire errors", () => {
    const cause = new RangeError("inner");
    const err = new ConfigurationError("--port 99999 is not a port", { setting: "--port", cause });
    expect([err.name, err.message, err.setting, err.cause]).toEqual(["ConfigurationError", "--port 99999 is not a port", "--port", cause]);
    expect(err).toBeInstanceOf(OperatorError);
    expect(err).not.toBeInstanceOf(HadisError);
    expect(new ModelExportError("x").name).toBe("ModelExportError");
    expect(new DependencyError("x").name).toBe("DependencyError");
    expect(new DependencyError("x").setting).toBeUndefined();
  });

  it("a flag, variable or file that cannot be used is a ConfigurationError", () => {
    expect(thrown(() => natsUrls("foo://host:4222"))).toBeInstanceOf(ConfigurationError);
    expect(thrown(() => natsTlsFromEnv({ HADIS_NATS_TLS_CA: "/no/such/ca.pem" }))).toBeInstanceOf(ConfigurationError);
    expect(thrown(() => subjects("a.b"))).toBeInstanceOf(ConfigurationError);
    expect(thrown(() => staticConfigFor("hadis", '{"light":"x"}'))).toBeInstanceOf(ConfigurationError);
    expect(thrown(() => createPolicy("no-such-policy", loadProfiles()))).toBeInstanceOf(ConfigurationError);
    expect(thrown(() => loadProfiles("/no/such/profiles"))).toBeInstanceOf(ConfigurationError);
  });

  it("a model export this build cannot run is a ModelExportError", () => {
    expect(thrown(() => createScheduler({ _class_name: "EulerDiscreteScheduler", beta_schedule: "squaredcos_cap_v2" }, 4))).toBeInstanceOf(
      ModelExportError,
    );
  });
});
