"""Trains a small MLP for real but logs only its loss: nothing a throughput parser can use."""
import torch

model = torch.nn.Linear(32, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    loss = model(torch.randn(8, 32)).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"epoch 0 step {step}: loss={loss.item():.4f}", flush=True)
