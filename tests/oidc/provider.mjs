// The OpenID Connect provider of the single sign-on tests: the certified `oidc-provider`
// package with its development login screen (any login name; the password is not checked).
// Configured from the environment by the test that starts it:
//   OIDC_PORT, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI,
//   OIDC_GROUPS_FILE: a JSON file {"login name": ["group", ...]}, read at each sign-in (the
//   `groups` claim of each account; a test edits it between sign-ins).
// It prints "listening <issuer>" once it answers.
import { readFileSync } from "node:fs";

import Provider from "oidc-provider";

const port = Number(process.env.OIDC_PORT);
const issuer = `http://127.0.0.1:${port}`;
const groupsOf = (id) => JSON.parse(readFileSync(process.env.OIDC_GROUPS_FILE, "utf8"))[id] || [];

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: process.env.OIDC_CLIENT_ID,
      client_secret: process.env.OIDC_CLIENT_SECRET,
      redirect_uris: [process.env.OIDC_REDIRECT_URI],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["preferred_username", "name"],
    groups: ["groups"],
  },
  scopes: ["openid", "email", "profile", "groups"],
  // Every login name is an account; its claims follow from the name.
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: id,
          name: `User ${id}`,
          email: `${id}@example.test`,
          email_verified: true,
          groups: groupsOf(id),
        };
      },
    };
  },
  // The development login form and consent screen: the test drives them in Chromium.
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ["headway-test-only-cookie-key"] },
});
provider.proxy = false;
provider.listen(port, "127.0.0.1", () => console.log(`listening ${issuer}`));
