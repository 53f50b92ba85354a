import { axios } from "@pipedream/platform";

const slack = {
  type: "app",
  app: "slack",
  propDefinitions: {
    conversation: {
      type: "string",
      label: "Channel",
      description: "Select a public or private channel",
      useQuery: true,
      async options({ query, prevContext }) {
        const { channels, response_metadata: meta } = await this._request({
          path: "/conversations.list",
          params: {
            types: "public_channel,private_channel",
            cursor: prevContext?.cursor,
            limit: 200,
          },
        });
        const matching = query
          ? channels.filter((c) => c.name.includes(query))
          : channels;
        return {
          options: matching.map((c) => ({
            label: `#${c.name}`,
            value: c.id,
          })),
          context: {
            cursor: meta?.next_cursor,
          },
        };
      },
    },
    text: {
      type: "string",
      label: "Text",
      description: "Text of the message",
    },
  },
  methods: {
    _headers() {
      return {
        Authorization: `Bearer ${this.$auth.oauth_access_token}`,
        "Content-Type": "application/json; charset=utf-8",
      };
    },
    async _request({ $ = this, path, ...opts }) {
      const data = await axios($, {
        url: `https://slack.com/api${path}`,
        headers: this._headers(),
        ...opts,
      });
      if (!data.ok) {
        throw new Error(`Slack API error: ${data.error}`);
      }
      return data;
    },
    postMessage($, data) {
      return this._request({
        $,
        method: "POST",
        path: "/chat.postMessage",
        data,
      });
    },
  },
};

export default {
  key: "test-app-slack-send-message",
  name: "Send Message",
  description: "Send a message to a Slack channel.",
  version: "0.3.1",
  type: "action",
  props: {
    slack,
    conversation: {
      propDefinition: [
        slack,
        "conversation",
      ],
    },
    text: {
      propDefinition: [
        slack,
        "text",
      ],
      description: "Text of the message; Slack `mrkdwn` is supported",
    },
    unfurlLinks: {
      type: "boolean",
      label: "Unfurl Links",
      optional: true,
      default: false,
    },
  },
  async run({ $ }) {
    const response = await this.slack.postMessage($, {
      channel: this.conversation,
      text: this.text,
      unfurl_links: this.unfurlLinks,
    });
    $.export("$summary", `Sent message to ${this.conversation}`);
    return response;
  },
};
