import { defineSource } from "@pipedream/types";

interface Order {
  id: string;
  total: number;
  currency: string;
}

interface HttpEvent {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: unknown;
}

export default defineSource({
  key: "test-ts-new-order",
  name: "New Order (TypeScript)",
  description: "Emit orders posted to an HTTP endpoint.",
  version: "0.0.1",
  type: "source",
  props: {
    http: {
      type: "$.interface.http",
      customResponse: false,
    },
    minimumTotal: {
      type: "integer",
      label: "Minimum Total",
      description: "Ignore orders below this amount, in cents",
      optional: true,
      default: 0,
    },
  },
  methods: {
    isOrder(body: unknown): body is Order {
      const candidate = body as Partial<Order> | null;
      return typeof candidate?.id === "string"
        && typeof candidate?.total === "number"
        && typeof candidate?.currency === "string";
    },
  },
  async run(event: HttpEvent): Promise<void> {
    if (!this.isOrder(event.body)) {
      console.log(`Ignoring ${event.method} ${event.path}: body is not an order`);
      return;
    }
    const order: Order = event.body;
    const minimum: number = this.minimumTotal ?? 0;
    if (order.total < minimum) {
      return;
    }
    this.$emit(order, {
      id: order.id,
      summary: `Order ${order.id}: ${(order.total / 100).toFixed(2)} ${order.currency}`,
      ts: Date.now(),
    });
  },
});
