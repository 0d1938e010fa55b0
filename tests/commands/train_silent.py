"""Fits y = 3x + 1 by gradient descent (pure Python) and logs only its loss: nothing a throughput parser can use."""
w, b = 0.0, 0.0
for step in range(5):
    loss = 0.0
    for x in range(-50, 50):
        x /= 50
        error = w * x + b - (3 * x + 1)
        loss += error * error / 100
        w, b = w - 0.05 * error * x, b - 0.05 * error
    print(f"epoch 0 step {step}: loss={loss:.4f}", flush=True)
